/**
 * The server's questions (`window/showMessageRequest`: "run `pytest -q`?", "write outside the workspace?")
 * as a modal dialog. vscode-languageclient shows them as a toast, which VS Code hides in the notification
 * centre after a while although the run still waits for the answer (issue 25: "the shell question
 * disappears after ~30 s"); a modal stays until the user answers or dismisses it.
 */
import * as api from './vscodeapi';

export interface MessageActionItem {
  title: string;
  [extra: string]: unknown;
}

export interface ShowMessageRequestParams {
  type: number;
  message: string;
  actions?: MessageActionItem[];
}

/** LSP MessageType: 1 error, 2 warning, 3 info, 4 log. */
export async function askModal(params: ShowMessageRequestParams): Promise<MessageActionItem | null> {
  const actions = params.actions ?? [];
  const message = /^nagent\b/i.test(params.message) ? params.message : `nagent: ${params.message}`;
  if (actions.length === 0) {
    // nothing to answer: an ordinary notification
    void (params.type === 1 ? api.showErrorMessage(message) : params.type === 2 ? api.showWarningMessage(message) : api.showInformationMessage(message));
    return null;
  }
  const titles = actions.map((a) => a.title);
  const choice = params.type <= 2 ? await api.showModalWarning(message, ...titles) : await api.showModalInformation(message, ...titles);
  return actions.find((a) => a.title === choice) ?? null;
}
