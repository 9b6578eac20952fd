// Light or dark: the console says which through `host.useTheme()`; the
// playground (and a console without that hook) follows the system setting.
// The stylesheet prefers the console's own CSS variables either way and only
// falls back to its own palette for the theme named here.

import { useSyncExternalStore } from "react";

export type Theme = "light" | "dark";

let hostUseTheme: (() => Theme) | undefined;

/** Installs the console's theme hook (from `setup(host)`); `undefined` removes it. */
export function setHostTheme(hook: (() => Theme) | undefined): void {
  hostUseTheme = hook;
}

const query = "(prefers-color-scheme: dark)";

function subscribe(onChange: () => void): () => void {
  if (typeof window === "undefined" || !window.matchMedia) return () => {};
  const media = window.matchMedia(query);
  media.addEventListener("change", onChange);
  return () => media.removeEventListener("change", onChange);
}

function systemTheme(): Theme | undefined {
  if (typeof window === "undefined" || !window.matchMedia) return undefined;
  return window.matchMedia(query).matches ? "dark" : "light";
}

function useSystemTheme(): Theme | undefined {
  return useSyncExternalStore(subscribe, systemTheme, () => undefined);
}

/** The theme a card renders in; `undefined` when unknown (server-side rendering). */
export function useTheme(): Theme | undefined {
  // The hook is chosen once at setup, so every render of a card calls the same one.
  const hook = hostUseTheme ?? useSystemTheme;
  const theme = hook();
  return theme === "dark" || theme === "light" ? theme : undefined;
}
