/**
 * A stub of src/vscodeapi.ts for unit tests: modules that reach the editor only through the seam
 * can then run under plain node (no `vscode` module). Import this module before the module under
 * test: it puts `seam` in require's cache as the compiled vscodeapi.js, so their
 * `import * as api from './vscodeapi'` binds to it. Tests set the wrappers they need on `seam`.
 */
import * as path from 'path';

export type Api = typeof import('../../src/vscodeapi');

/** The stubbed seam (`__esModule` so that `import * as api` returns this very object). */
export const seam: Partial<Record<keyof Api, unknown>> & Record<string, unknown> = { __esModule: true };

const file = path.join(__dirname, '..', '..', 'src', 'vscodeapi.js');
require.cache[file] = { id: file, filename: file, loaded: true, exports: seam, children: [], paths: [] } as unknown as NodeModule;

/** A fake StatusBarItem that records what the extension sets. */
export interface FakeStatusBarItem {
  id: string;
  alignment: unknown;
  priority: number;
  name?: string;
  command?: unknown;
  text: string;
  tooltip?: unknown;
  visible: boolean;
  disposed: boolean;
  show(): void;
  hide(): void;
  dispose(): void;
}

export function fakeStatusBarItem(id: string, alignment: unknown, priority: number): FakeStatusBarItem {
  return {
    id,
    alignment,
    priority,
    text: '',
    visible: false,
    disposed: false,
    show() {
      this.visible = true;
    },
    hide() {
      this.visible = false;
    },
    dispose() {
      this.disposed = true;
    },
  };
}
