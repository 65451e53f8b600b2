/**
 * How the extension finds the nagent-lsp server, in order:
 *   1. `nagent.server.command` (an argv array), used as given;
 *   2. `nagent.server.python` → `<python> -m nagent_lsp` (checked: the module must import);
 *   3. the Python extension's active interpreter, when that extension is installed and the
 *      interpreter has nagent_lsp (otherwise we go on);
 *   4. `nagent-lsp` on PATH.
 * Pure: every probe of the outside world is passed in, so the order is unit-tested.
 */
import * as fs from 'fs';
import * as path from 'path';

export type LaunchSource = 'nagent.server.command' | 'nagent.server.python' | 'python-extension' | 'PATH';

export interface ServerLaunch {
  command: string;
  args: string[];
  source: LaunchSource;
}

export interface ResolveInput {
  /** `nagent.server.command` */
  command: readonly string[] | undefined;
  /** `nagent.server.python` */
  python: string | undefined;
  /** Active interpreter of the Python extension, or undefined when the extension is absent/has none. */
  pythonExtensionInterpreter: () => Promise<string | undefined>;
  /** Does `<python> -c "import nagent_lsp"` succeed? Returns an error text when it does not. */
  probeModule: (python: string) => Promise<string | undefined>;
  /** Absolute path of an executable on PATH, or undefined. */
  findOnPath: (name: string) => string | undefined;
  /** Is this path an executable file? (checks `nagent.server.command`'s program; absent: not checked) */
  isExecutable?: (p: string) => boolean;
}

export type Resolution =
  | { ok: true; launch: ServerLaunch; notes: string[]; warning?: string }
  | { ok: false; message: string; notes: string[] };

export const MODULE = 'nagent_lsp';
export const EXECUTABLE = 'nagent-lsp';

export async function resolveServer(input: ResolveInput): Promise<Resolution> {
  const notes: string[] = [];
  const argv = (input.command ?? []).filter((s) => typeof s === 'string');
  let badCommand: string | undefined;
  if (argv.length > 0 && argv[0].trim() !== '') {
    const program = argv[0];
    const found = !input.isExecutable || (program.includes('/') || program.includes('\\') ? input.isExecutable(program) : input.findOnPath(program) !== undefined);
    if (found) return { ok: true, launch: { command: program, args: argv.slice(1), source: 'nagent.server.command' }, notes };
    // the README promises "the first of these that works": go on with the others, and say so once
    badCommand = `nagent.server.command names "${program}", which is not an executable file${program.includes('/') ? '' : ' on PATH'}`;
    notes.push(badCommand);
  }
  const r = await resolveRest(input, notes);
  if (!badCommand) return r;
  if (r.ok) return { ...r, warning: `nagent: ${badCommand}; started the server from ${r.launch.source} instead (${[r.launch.command, ...r.launch.args].join(' ')}). Fix or clear the setting.` };
  return { ok: false, message: `nagent: ${badCommand}, and no other server was found. Fix the setting, or install nagent-lsp (see "nagent: How to Install").`, notes };
}

async function resolveRest(input: ResolveInput, notes: string[]): Promise<Resolution> {
  const python = (input.python ?? '').trim();
  if (python) {
    const problem = await input.probeModule(python);
    if (problem === undefined) {
      return { ok: true, launch: { command: python, args: ['-m', MODULE], source: 'nagent.server.python' }, notes };
    }
    return {
      ok: false,
      message:
        `nagent.server.python is set to "${python}", but "${python} -m ${MODULE}" cannot run: ${problem}. ` +
        `Install the server into that interpreter from a checkout of nagent-lsp ` +
        `("${python} -m pip install /path/to/nagent-lsp"; it is not on PyPI yet) or change the setting.`,
      notes,
    };
  }
  let interpreter: string | undefined;
  try {
    interpreter = await input.pythonExtensionInterpreter();
  } catch (e) {
    notes.push(`Python extension: could not read the active interpreter (${String(e)})`);
  }
  if (interpreter) {
    const problem = await input.probeModule(interpreter);
    if (problem === undefined) {
      return { ok: true, launch: { command: interpreter, args: ['-m', MODULE], source: 'python-extension' }, notes };
    }
    notes.push(`Python extension interpreter ${interpreter} has no ${MODULE} (${problem})`);
  }
  const exe = input.findOnPath(EXECUTABLE);
  if (exe) {
    return { ok: true, launch: { command: exe, args: [], source: 'PATH' }, notes };
  }
  notes.push(`${EXECUTABLE} is not on PATH`);
  return {
    ok: false,
    message:
      'nagent: the nagent-lsp server was not found. Install it from a checkout of nagent-lsp (it is not on PyPI ' +
      'yet: "pipx install /path/to/nagent-lsp", or "pip install /path/to/nagent-lsp" into a Python environment), ' +
      'then set "nagent.server.python" to that interpreter or "nagent.server.command" to the nagent-lsp ' +
      'executable, or put nagent-lsp on PATH.',
    notes,
  };
}

/** `which`: first executable regular file called `name` in the PATH entries. */
export function findOnPath(
  name: string,
  envPath: string | undefined = process.env.PATH,
  isExecutable: (p: string) => boolean = isExecutableFile,
  platform: NodeJS.Platform = process.platform,
  pathExt: string | undefined = process.env.PATHEXT,
): string | undefined {
  if (!envPath) return undefined;
  const sep = platform === 'win32' ? ';' : ':';
  const exts = platform === 'win32' ? (pathExt ?? '.EXE;.CMD;.BAT').split(';').concat(['']) : [''];
  for (const dir of envPath.split(sep)) {
    if (!dir) continue;
    for (const ext of exts) {
      const candidate = path.join(dir, name + ext);
      if (isExecutable(candidate)) return candidate;
    }
  }
  return undefined;
}

export function isExecutableFile(p: string): boolean {
  try {
    const st = fs.statSync(p);
    if (!st.isFile()) return false;
    if (process.platform === 'win32') return true;
    fs.accessSync(p, fs.constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

export function describeLaunch(l: ServerLaunch): string {
  return `${[l.command, ...l.args].map(quoteArg).join(' ')} (from ${l.source})`;
}

function quoteArg(s: string): string {
  return /^[\w@%+=:,./-]+$/.test(s) ? s : JSON.stringify(s);
}
