// ESLint (flat config) for the extension: typescript-eslint's recommended rules; CI runs it with --max-warnings 0.
import js from '@eslint/js';
import tseslint from 'typescript-eslint';

export default tseslint.config(
  { ignores: ['dist/**', 'out/**', 'node_modules/**', 'test/e2e/**', '*.vsix'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    files: ['src/**/*.ts', 'test/unit/**/*.ts'],
    languageOptions: { ecmaVersion: 2022, sourceType: 'module' },
    rules: {
      '@typescript-eslint/no-unused-vars': ['warn', { argsIgnorePattern: '^_' }],
      '@typescript-eslint/no-explicit-any': 'warn',
      eqeqeq: ['warn', 'always'],
      curly: ['warn', 'multi-line'],
      'no-throw-literal': 'warn',
      semi: 'off',
      // Only src/vscodeapi.ts may load the `vscode` module at run time (ruff-vscode's seam): the rest
      // import its types alone, so unit tests can replace the seam with a stub (test/unit/seam.ts).
      'no-restricted-imports': 'off',
      '@typescript-eslint/no-restricted-imports': [
        'error',
        {
          paths: [
            {
              name: 'vscode',
              allowTypeImports: true,
              message: "Call the editor API through './vscodeapi' (add a wrapper there); only `import type` from 'vscode' elsewhere.",
            },
          ],
        },
      ],
    },
  },
  {
    files: ['src/vscodeapi.ts'],
    rules: { '@typescript-eslint/no-restricted-imports': 'off' },
  },
);
