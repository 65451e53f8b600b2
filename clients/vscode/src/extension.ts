/** Entry point: wires the client, the commands, settings and the test hook together. */
import type * as vscode from 'vscode';
import * as api from './vscodeapi';
import { NagentClient } from './client';
import { CommandHandlers } from './commands';
import { Commands } from './pure/ids';
import { errorMessage } from './pure/format';
import { SECTION, SERVER_LAUNCH_SECTION } from './pure/settings';
import { TestReporter } from './pure/testReport';
import { StatusBar } from './statusBar';
import { VIEW_SCHEME, ViewProvider } from './views';
import { isConversationPath } from './pure/conversation';
import * as fs from 'fs';

let nagent: NagentClient | undefined;

export async function activate(ctx: vscode.ExtensionContext): Promise<void> {
  const log = api.createOutputChannel('nagent');
  ctx.subscriptions.push(log);
  const reporter = TestReporter.fromEnv();
  if (reporter.enabled) log.info(`test report: ${reporter.file}`);

  const statusBar = new StatusBar();
  ctx.subscriptions.push(statusBar);

  const views = new ViewProvider();
  ctx.subscriptions.push(views, api.registerTextDocumentContentProvider(VIEW_SCHEME, views));

  // eslint-disable-next-line prefer-const -- the client (created first) calls back into the handlers created after it
  let handlers: CommandHandlers | undefined;
  const client = new NagentClient(log, statusBar, {
    executeCommand: (command, args, next) => handlers!.executeServerCommand(command, args, next),
    onStartFailure: (message, notFound) => {
      const actions = notFound ? ['How to Install', 'Open Settings'] : ['Show Log', 'Open Settings'];
      handlers?.report('server:start', false, undefined, message);
      void api.showErrorMessage(message, ...actions).then((choice) => {
        if (choice === 'How to Install') void showInstallHelp(ctx);
        if (choice === 'Open Settings') void api.commands.execute('workbench.action.openSettings', 'nagent.server');
        if (choice === 'Show Log') log.show();
      });
    },
    onHover: (uri, markdown) => handlers?.report('hover', true, { uri, markdown }),
    onStream: (params) => handlers?.onStream(params),
    showDocument: async (uri) => {
      if (!handlers || uri.scheme !== 'file' || !isConversationPath(uri.fsPath)) return false;
      await handlers.conversations.show(uri);
      return true;
    },
  });
  nagent = client;
  ctx.subscriptions.push(client);
  handlers = new CommandHandlers(ctx, client, views, reporter);
  ctx.subscriptions.push(...handlers.register());
  const h = handlers;
  ctx.subscriptions.push(
    api.commands.register(Commands.installHelp, async () => {
      await showInstallHelp(ctx);
      h.report(Commands.installHelp, true, { readme: readmeUri(ctx).toString() });
    }),
  );

  ctx.subscriptions.push(
    api.onDidChangeConfiguration((e) => {
      if (!e.affectsConfiguration(SECTION)) return;
      if (e.affectsConfiguration(SERVER_LAUNCH_SECTION)) {
        log.info('server launch settings changed: restarting nagent-lsp');
        void client.restart().catch(() => undefined);
        return;
      }
      void client.sendSettings().catch((err) => log.warn(`sending settings: ${errorMessage(err)}`));
    }),
  );

  try {
    await client.ensure();
  } catch {
    // already reported (notification + log); commands retry the start.
  }
  handlers.report('activated', client.running, {
    serverCommands: client.serverCommands(),
    hoverProvider: Boolean(client.client?.initializeResult?.capabilities.hoverProvider),
    launch: client.launch,
  });
}

/** vsce packs the README as `readme.md`; on a case-sensitive file system only that name exists. */
export function readmeUri(ctx: vscode.ExtensionContext): vscode.Uri {
  for (const name of ['readme.md', 'README.md']) {
    const uri = api.Uri.joinPath(ctx.extensionUri, name);
    if (fs.existsSync(uri.fsPath)) return uri;
  }
  return api.Uri.joinPath(ctx.extensionUri, 'readme.md');
}

async function showInstallHelp(ctx: vscode.ExtensionContext): Promise<void> {
  const readme = readmeUri(ctx);
  try {
    await api.commands.execute('markdown.showPreview', readme);
  } catch {
    await api.showTextDocument(readme);
  }
}

export async function deactivate(): Promise<void> {
  await nagent?.stop();
  nagent = undefined;
}
