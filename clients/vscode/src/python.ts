/** Optional integration with the Python extension (no extensionDependencies: it may be absent). */
import { execFile } from 'child_process';
import type * as vscode from 'vscode';
import { getExtension } from './vscodeapi';
import { MODULE } from './pure/serverCommand';

export const PYTHON_EXTENSION_ID = 'ms-python.python';

interface PythonEnvironmentsApi {
  getActiveEnvironmentPath?(resource?: vscode.Uri): { path: string } | undefined;
  resolveEnvironment?(env: { path: string } | string): Promise<{ executable?: { uri?: vscode.Uri } } | undefined>;
  onDidChangeActiveEnvironmentPath?: vscode.Event<unknown>;
}
interface PythonApi {
  environments?: PythonEnvironmentsApi;
  settings?: { getExecutionDetails?(resource?: vscode.Uri): { execCommand?: string[] } | undefined };
}

function withTimeout<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const t = setTimeout(() => reject(new Error(`${what} timed out after ${ms} ms`)), ms);
    p.then(
      (v) => {
        clearTimeout(t);
        resolve(v);
      },
      (e) => {
        clearTimeout(t);
        reject(e);
      },
    );
  });
}

async function api(): Promise<PythonApi | undefined> {
  const ext = getExtension<PythonApi>(PYTHON_EXTENSION_ID);
  if (!ext) return undefined;
  const exports = ext.isActive ? ext.exports : await withTimeout(Promise.resolve(ext.activate()), 15000, 'activating the Python extension');
  return exports ?? undefined;
}

/** The Python extension's active interpreter for the resource, or undefined when there is none. */
export async function activeInterpreter(resource?: vscode.Uri): Promise<string | undefined> {
  const py = await api();
  if (!py) return undefined;
  const envs = py.environments;
  if (envs?.getActiveEnvironmentPath) {
    const envPath = envs.getActiveEnvironmentPath(resource);
    if (envPath?.path) {
      if (envs.resolveEnvironment) {
        const resolved = await withTimeout(envs.resolveEnvironment(envPath), 15000, 'resolving the Python environment');
        const exe = resolved?.executable?.uri?.fsPath;
        if (exe) return exe;
      }
      return envPath.path;
    }
  }
  const cmd = py.settings?.getExecutionDetails?.(resource)?.execCommand;
  return cmd && cmd.length > 0 ? cmd[0] : undefined;
}

/** Subscribe to interpreter changes when the Python extension offers it. */
export async function onInterpreterChange(listener: () => void): Promise<vscode.Disposable | undefined> {
  try {
    const ext = getExtension<PythonApi>(PYTHON_EXTENSION_ID);
    if (!ext || !ext.isActive) return undefined;
    const ev = ext.exports?.environments?.onDidChangeActiveEnvironmentPath;
    return ev ? ev(() => listener()) : undefined;
  } catch {
    return undefined;
  }
}

/** undefined when `<python> -c "import nagent_lsp"` works, else a one-line reason. */
export function probeModule(python: string): Promise<string | undefined> {
  return new Promise((resolve) => {
    execFile(python, ['-c', `import ${MODULE}`], { timeout: 20000, windowsHide: true }, (err, _stdout, stderr) => {
      if (!err) return resolve(undefined);
      const lines = String(stderr || err.message).trim().split(/\r?\n/);
      resolve(lines[lines.length - 1] || err.message);
    });
  });
}
