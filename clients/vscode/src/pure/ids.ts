/**
 * Ids of the extension's own commands. They all live under `nagent.vscode.`: vscode-languageclient
 * registers every server command (`nagent.edit`, `nagent.status`, ...) as a VS Code command, and an
 * extension command with the same id would make the client fail to start.
 */
export const Commands = {
  editSelection: 'nagent.vscode.editSelection',
  editFile: 'nagent.vscode.editFile',
  editWithAgent: 'nagent.vscode.editWithAgent',
  runRecipe: 'nagent.vscode.runRecipe',
  reviewProposals: 'nagent.vscode.reviewProposals',
  acceptAll: 'nagent.vscode.acceptAll',
  rejectAll: 'nagent.vscode.rejectAll',
  acceptHunk: 'nagent.vscode.acceptHunk',
  rejectHunk: 'nagent.vscode.rejectHunk',
  showAnswer: 'nagent.vscode.showAnswer',
  sendFromConversation: 'nagent.vscode.sendFromConversation',
  openConversation: 'nagent.vscode.openConversation',
  showHistory: 'nagent.vscode.showHistory',
  showCoedits: 'nagent.vscode.showCoedits',
  split: 'nagent.vscode.split',
  patch: 'nagent.vscode.patch',
  summarize: 'nagent.vscode.summarize',
  clearConversation: 'nagent.vscode.clearConversation',
  showStatus: 'nagent.vscode.showStatus',
  restart: 'nagent.vscode.restart',
  showLog: 'nagent.vscode.showLog',
  installHelp: 'nagent.vscode.installHelp',
  trustRepository: 'nagent.vscode.trustRepository',
  revokeRepositoryTrust: 'nagent.vscode.revokeRepositoryTrust',
} as const;
