// The console renderer: one card per operation, sharing the frame in lib/shared.tsx.

import type { ReactNode } from "react";
import { redactRaw } from "../lib/redact";
import type { CallMessage, Phase } from "../lib/shared";
import { RegisterFunctionCard } from "./register-function";
import { ResumeCard } from "./resume";
import { RunCard } from "./run";
import { RestoreCard, SnapshotCard } from "./session";
import { TeardownCard } from "./teardown";

/** The operations that have a card, by function id. */
export const OPERATIONS = {
  "code-runner::run": RunCard,
  "code-runner::resume": ResumeCard,
  "code-runner::register_function": RegisterFunctionCard,
  "code-runner::teardown": TeardownCard,
  "code-runner::snapshot": SnapshotCard,
  "code-runner::restore": RestoreCard,
} as const;

type OperationId = keyof typeof OPERATIONS;

function isOperation(functionId: string): functionId is OperationId {
  return Object.prototype.hasOwnProperty.call(OPERATIONS, functionId);
}

/** The host shows its own error view for a call whose output has an `error` key. */
export function failed(message: CallMessage): boolean {
  const output = message.output;
  return output !== null && typeof output === "object" && "error" in output;
}

/** The card of `message` in `phase`, or null when it is not ours or the call failed. */
export function renderCall(message: CallMessage, phase: Phase): ReactNode | null {
  if (!isOperation(message.functionId)) return null;
  if (phase === "done") {
    const output = message.output;
    if (failed(message) || output === null || typeof output !== "object") return null;
  }
  const Component = OPERATIONS[message.functionId];
  return <Component message={message} phase={phase} />;
}

/** The renderer object `host.functionTriggers.register` takes (README §4b). */
export interface Renderer {
  id: string;
  isMatch(functionId: string): boolean;
  tryRender(message: CallMessage): ReactNode | null;
  tryRenderRunning(message: CallMessage): ReactNode | null;
  tryRenderPreview(message: CallMessage): ReactNode | null;
  FunctionIdLabel(props: { functionId: string }): ReactNode;
  primaryTabLabel: string;
  redactRaw(value: unknown): unknown;
}

/** code-runner's renderer for the console. */
export function createRenderer(): Renderer {
  return {
    id: "code-runner/page.js#cards",
    isMatch: isOperation,
    tryRender: (message) => renderCall(message, "done"),
    tryRenderRunning: (message) => renderCall(message, "running"),
    tryRenderPreview: (message) => renderCall(message, "preview"),
    FunctionIdLabel: ({ functionId }) => (
      <span className="cr-id-label">
        <span className="cr-id-label-ns">code-runner::</span>
        {functionId.replace(/^code-runner::/, "")}
      </span>
    ),
    primaryTabLabel: "card",
    redactRaw,
  };
}
