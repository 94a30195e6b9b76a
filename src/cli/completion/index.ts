// Entry point of the completion script generators: one renderer per supported shell.
import { renderBash } from './bash.js';
import { renderFish } from './fish.js';
import type { CompletionCommand } from './model.js';
import { renderPowershell } from './powershell.js';
import type { RenderOptions } from './walk.js';
import { renderZsh } from './zsh.js';

export type { RenderOptions } from './walk.js';

export const SHELLS = ['bash', 'zsh', 'fish', 'powershell'] as const;
export type Shell = (typeof SHELLS)[number];

const renderers: Record<Shell, (root: CompletionCommand, opts: RenderOptions) => string> = {
  bash: renderBash,
  zsh: renderZsh,
  fish: renderFish,
  powershell: renderPowershell,
};

/** The completion script of `shell` for the command tree `root`. */
export function renderCompletion(shell: Shell, root: CompletionCommand, opts: RenderOptions): string {
  return renderers[shell](root, opts);
}
