/** The language client's life cycle: find the server, start it, talk to it, restart it. */
import type * as vscode from 'vscode';
import * as api from './vscodeapi';
import {
  CancellationToken,
  DidChangeConfigurationNotification,
  ExecuteCommandRequest,
  LanguageClient,
  LanguageClientOptions,
  Middleware,
  RevealOutputChannelOn,
  ServerOptions,
  ShowMessageRequest,
  State,
  WorkDoneProgressCancelNotification,
} from 'vscode-languageclient/node';
import { askModal } from './ask';
import { NotificationProgress } from './progress';
import { errorMessage, ServerState } from './pure/format';
import { executeParams, ServerCommands, StatusResult, StreamParams, Tokens } from './pure/protocol';
import { Commands } from './pure/ids';

const STREAM_NOTIFICATION = 'nagent/stream';
const OPEN_ATTRIBUTION = Commands.openAttribution;
import { describeLaunch, findOnPath, isExecutableFile, resolveServer, ServerLaunch } from './pure/serverCommand';
import { changedScalars, clearedKeys, explicitServerSettings, SECTION, sectionValue, settingsApplied } from './pure/settings';
import { activeInterpreter, onInterpreterChange, probeModule } from './python';
import { StatusBar } from './statusBar';

export class ServerNotFound extends Error {}

/** Hooks the extension supplies (command presentation lives in commands.ts). */
export interface ClientHooks {
  /** A server command run outside our own commands (code action, another extension). */
  executeCommand?: (command: string, args: unknown[], next: (command: string, args: unknown[]) => Promise<unknown>) => Promise<unknown>;
  onStartFailure?: (message: string, notFound: boolean) => void;
  /** Called with the Markdown of each hover the server answers (used by the test hook). */
  onHover?: (uri: string, markdown: string[]) => void;
  /** A `nagent/stream` notification: the next piece of a run's answer. */
  onStream?: (params: StreamParams) => void;
  /** window/showDocument for a document the extension shows its own way (a conversation); true when handled. */
  showDocument?: (uri: vscode.Uri, takeFocus: boolean) => Promise<boolean>;
}

export function serverSettings(resource?: vscode.Uri): Record<string, unknown> {
  const cfg = api.getConfiguration(SECTION, resource);
  return explicitServerSettings({ get: (k) => cfg.get(k), inspect: (k) => cfg.inspect(k) });
}

export class NagentClient implements vscode.Disposable {
  client: LanguageClient | undefined;
  launch: ServerLaunch | undefined;
  status: StatusResult | undefined;
  /** The settings sent as initializationOptions to the running server. */
  private initSettings: Record<string, unknown> = {};
  /** The settings last sent with didChangeConfiguration (undefined: none since the start). */
  private sentSettings: Record<string, unknown> | undefined;
  private state: ServerState = 'stopped';
  private starting: Promise<LanguageClient> | undefined;
  private readonly disposables: vscode.Disposable[] = [];
  private interpreterListener: vscode.Disposable | undefined;
  private readonly progress = new NotificationProgress((token) => {
    void this.client?.sendNotification(WorkDoneProgressCancelNotification.type, { token });
  });

  constructor(
    readonly log: vscode.LogOutputChannel,
    readonly statusBar: StatusBar,
    private readonly hooks: ClientHooks,
  ) {
    this.render();
  }

  render(): void {
    this.statusBar.update({ state: this.state, model: this.status?.model, configured: this.status?.modelConfigured ?? true });
  }

  private setState(s: ServerState): void {
    this.state = s;
    this.render();
  }

  /** Show `label` in the status bar (spinning) while `fn` runs. */
  working<T>(label: string, fn: () => Promise<T>): Promise<T> {
    return this.statusBar.working(label, fn);
  }

  /** The last run's tokens, as the status bar shows them. */
  get lastTokens(): Tokens | undefined {
    return this.statusBar.lastTokens;
  }

  get running(): boolean {
    return this.client?.state === State.Running;
  }

  /** Start if needed and return the running client. Concurrent callers share one start. */
  async ensure(): Promise<LanguageClient> {
    if (this.client && this.client.state === State.Running) return this.client;
    if (!this.starting) {
      this.starting = this.start().finally(() => {
        this.starting = undefined;
      });
    }
    return this.starting;
  }

  private async resolve(): Promise<ServerLaunch> {
    const cfg = api.getConfiguration(SECTION);
    const resource = api.activeEditor()?.document.uri ?? api.workspaceFolders()?.[0]?.uri;
    const r = await resolveServer({
      command: cfg.get<string[]>('server.command'),
      python: cfg.get<string>('server.python'),
      pythonExtensionInterpreter: () => activeInterpreter(resource),
      probeModule,
      findOnPath: (name) => findOnPath(name),
      isExecutable: isExecutableFile,
    });
    for (const n of r.notes) this.log.info(`server lookup: ${n}`);
    if (!r.ok) throw new ServerNotFound(r.message);
    if (r.warning) {
      this.log.warn(r.warning);
      void api.showWarningMessage(r.warning, 'Open Settings').then((c) => {
        if (c === 'Open Settings') void api.commands.execute('workbench.action.openSettings', 'nagent.server.command');
      });
    }
    return r.launch;
  }

  private middleware(): Middleware {
    return {
      workspace: {
        // workspace/configuration: answer section "nagent" with the explicitly set server settings.
        configuration: async (params, token, next) => {
          const answers = await next(params, token);
          if (!Array.isArray(answers)) return answers;
          return params.items.map((item, i) => {
            if (item.section === SECTION || item.section?.startsWith(SECTION + '.')) {
              const scope = item.scopeUri ? api.Uri.parse(item.scopeUri) : undefined;
              return sectionValue(serverSettings(scope), item.section);
            }
            return answers[i];
          });
        },
      },
      window: {
        // Documents the server shows (the conversation) open beside the editor.
        showDocument: async (params) => {
          try {
            const uri = api.Uri.parse(params.uri);
            if (params.external) return { success: await api.openExternal(uri) };
            if (this.hooks.showDocument && (await this.hooks.showDocument(uri, params.takeFocus === true))) return { success: true };
            const selection = params.selection
              ? new api.Range(params.selection.start.line, params.selection.start.character, params.selection.end.line, params.selection.end.character)
              : undefined;
            await api.showTextDocument(uri, {
              viewColumn: api.ViewColumn.Beside,
              preserveFocus: params.takeFocus !== true,
              preview: false,
              selection,
            });
            return { success: true };
          } catch (e) {
            this.log.warn(`window/showDocument ${params.uri} failed: ${errorMessage(e)}`);
            return { success: false };
          }
        },
      },
      // $/progress as cancellable notifications (see progress.ts); "end" also reaches the
      // client's own (status bar) progress part so that it is cleaned up.
      handleWorkDoneProgress: (token, params, next) => {
        this.progress.handle(token, params);
        if (params.kind === 'end') next(token, params);
      },
      provideHover: async (document, position, token, next) => {
        const hover = await next(document, position, token);
        if (hover && this.hooks.onHover) {
          const md = hover.contents.map((c) => (typeof c === 'string' ? c : c.value));
          this.hooks.onHover(document.uri.toString(), md);
        }
        return hover;
      },
      executeCommand: async (command, args, next) => {
        if (this.hooks.executeCommand) {
          return this.hooks.executeCommand(command, args, (c, a) => Promise.resolve(next(c, a)));
        }
        return next(command, args);
      },
    };
  }

  private async start(): Promise<LanguageClient> {
    this.setState('starting');
    let launch: ServerLaunch;
    try {
      launch = await this.resolve();
    } catch (e) {
      this.setState('failed');
      const msg = errorMessage(e);
      this.log.error(msg);
      this.hooks.onStartFailure?.(msg, e instanceof ServerNotFound);
      throw e;
    }
    this.launch = launch;
    this.log.info(`starting nagent-lsp: ${describeLaunch(launch)}`);
    const cwd = api.workspaceFolders()?.[0]?.uri.fsPath;
    const serverOptions: ServerOptions = {
      command: launch.command,
      args: launch.args,
      options: { cwd, env: { ...process.env } },
    };
    const clientOptions: LanguageClientOptions = {
      documentSelector: [{ scheme: 'file' }, { scheme: 'untitled' }],
      outputChannel: this.log,
      traceOutputChannel: this.log,
      revealOutputChannelOn: RevealOutputChannelOn.Never,
      initializationOptions: () => {
        this.initSettings = serverSettings();
        this.sentSettings = undefined;
        return this.initSettings;
      },
      middleware: this.middleware(),
      connectionOptions: { maxRestartCount: 3 },
      // hover cards link to the conversation that wrote a line (contracts.md C): only that command is trusted
      markdown: { isTrusted: { enabledCommands: [OPEN_ATTRIBUTION] }, supportHtml: false },
    };
    const client = new LanguageClient('nagent', 'nagent', serverOptions, clientOptions);
    // This client asks for nagent.edit's request text and shows every result itself (see codeaction_show.py).
    client.registerFeature({
      fillClientCapabilities: (capabilities) => {
        // requestInput: this client asks for a request itself; stream: it shows `nagent/stream` deltas live (contracts.md A)
        capabilities.experimental = { ...(capabilities.experimental as object | undefined), nagent: { requestInput: true, stream: true } };
      },
      initialize: () => undefined,
      getState: () => ({ kind: 'static' }),
      clear: () => undefined,
    });
    // the server's questions wait for an answer: a modal instead of the client's toast (ask.ts)
    client.onRequest(ShowMessageRequest.type, (params) => askModal(params));
    client.onNotification(STREAM_NOTIFICATION, (params: StreamParams) => this.hooks.onStream?.(params));
    client.onDidChangeState((e) => {
      this.log.info(`server state: ${State[e.oldState]} -> ${State[e.newState]}`);
      if (e.newState === State.Stopped && this.client === client) this.setState('stopped');
      if (e.newState === State.Running && this.client === client) this.setState('running');
    });
    this.client = client;
    try {
      await client.start();
    } catch (e) {
      this.client = undefined;
      this.setState('failed');
      const msg = `nagent: the server failed to start (${describeLaunch(launch)}): ${errorMessage(e)}`;
      this.log.error(msg);
      this.hooks.onStartFailure?.(msg, false);
      try {
        await client.dispose();
      } catch {
        /* already gone */
      }
      throw new Error(msg);
    }
    this.setState('running');
    const cmds = client.initializeResult?.capabilities.executeCommandProvider?.commands ?? [];
    this.log.info(`server commands: ${cmds.join(', ') || '(none)'}`);
    this.interpreterListener?.dispose();
    this.interpreterListener = await onInterpreterChange(() => {
      if (this.launch?.source === 'python-extension') {
        this.log.info('Python interpreter changed: restarting nagent-lsp');
        void this.restart().catch(() => undefined);
      }
    });
    void this.refreshStatus();
    return client;
  }

  /** Server commands advertised in the initialize result. */
  serverCommands(): string[] {
    return this.client?.initializeResult?.capabilities.executeCommandProvider?.commands ?? [];
  }

  async refreshStatus(): Promise<StatusResult | undefined> {
    try {
      if (this.client && !this.serverCommands().includes(ServerCommands.status)) return undefined;
      this.status = (await this.request(ServerCommands.status, {})) as StatusResult;
      this.render();
      return this.status;
    } catch (e) {
      this.log.warn(`nagent.status failed: ${errorMessage(e)}`);
      return undefined;
    }
  }

  /** Run a server command with its single object argument; rejects with the server's error. */
  async request<T = unknown>(command: string, arg: Record<string, unknown>, token?: CancellationToken): Promise<T> {
    const client = await this.ensure();
    const advertised = this.serverCommands();
    if (advertised.length > 0 && !advertised.includes(command)) {
      throw new Error(`this nagent-lsp server (${this.status?.version ?? 'unknown version'}) does not provide the command ${command}`);
    }
    this.log.info(`→ ${command} ${JSON.stringify(arg)}`);
    const t0 = Date.now();
    try {
      const result = (await client.sendRequest(ExecuteCommandRequest.type, executeParams(command, arg), token)) as T;
      this.log.info(`← ${command} (${Date.now() - t0} ms) ${truncate(JSON.stringify(result))}`);
      return result;
    } catch (e) {
      this.log.error(`← ${command} failed (${Date.now() - t0} ms): ${errorMessage(e)}`);
      throw e;
    }
  }

  /** Keep the last run's tokens for the status bar; a run that spent nothing (cancelled early) keeps the previous figures. */
  noteTokens(t: Tokens | undefined): void {
    this.statusBar.noteTokens(t);
  }

  /** Push changed settings (the server then pulls workspace/configuration again). */
  async sendSettings(): Promise<void> {
    if (this.starting) await this.starting.catch(() => undefined); // a restart in progress: tell the new server
    if (!this.running || !this.client) return;
    const settings = serverSettings();
    this.log.info(`settings changed: ${JSON.stringify(settings)}`);
    const cleared = clearedKeys(this.initSettings, settings);
    if (cleared.length > 0) {
      this.log.info(`settings cleared (${cleared.join(', ')}): restarting nagent-lsp so that they fall back`);
      await this.restart();
      return;
    }
    const expected = changedScalars(this.sentSettings ?? this.initSettings, settings);
    this.sentSettings = settings;
    await this.client.sendNotification(DidChangeConfigurationNotification.type, { settings: { [SECTION]: settings } });
    void this.refreshStatusWhenApplied(expected);
  }

  /**
   * The status bar shows the model the server uses: ask for the status until the server reports the
   * changed values (it applies them after it pulled workspace/configuration), a few seconds at most.
   */
  async refreshStatusWhenApplied(expected: Record<string, unknown>, tries = 25, pauseMs = 200): Promise<StatusResult | undefined> {
    let status: StatusResult | undefined;
    for (let i = 0; i < tries; i++) {
      status = await this.refreshStatus();
      if (!status || settingsApplied(expected, status.settings as Record<string, unknown> | undefined)) return status;
      await new Promise((r) => setTimeout(r, pauseMs));
    }
    return status;
  }

  async stop(): Promise<void> {
    const c = this.client;
    this.client = undefined;
    this.interpreterListener?.dispose();
    this.interpreterListener = undefined;
    if (c) {
      try {
        await c.dispose(5000);
      } catch (e) {
        this.log.warn(`stopping the server: ${errorMessage(e)}`);
      }
    }
    this.setState('stopped');
  }

  async restart(): Promise<LanguageClient> {
    if (this.starting) await this.starting.catch(() => undefined);
    await this.stop();
    this.status = undefined;
    return this.ensure();
  }

  dispose(): void {
    this.progress.dispose();
    for (const d of this.disposables) d.dispose();
    void this.stop();
  }
}

function truncate(s: string | undefined, n = 2000): string {
  if (s === undefined) return 'undefined';
  return s.length > n ? s.slice(0, n) + `… (${s.length} chars)` : s;
}
