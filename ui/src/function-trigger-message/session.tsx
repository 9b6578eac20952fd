// code-runner::snapshot and code-runner::restore: a session saved, and a new
// runtime made where it was (a fork). Both ids are capabilities, so both show
// masked.

import { maskId } from "../lib/redact";
import { formatBytes } from "./files";
import { Card, Fact, RuntimeChip, Section, count, record, text, type CallMessage, type Phase } from "../lib/shared";

/** A snapshot id as a card shows it: `sn_` and four more, masked. */
function SnapshotId(props: { id: string }) {
  return <span className="cr-mono cr-snapshot-id">{maskId(props.id)}</span>;
}

function tone(phase: Phase, ok: boolean): "ok" | "warn" | "running" | "pending" {
  if (phase === "done") return ok ? "ok" : "warn";
  return phase === "running" ? "running" : "pending";
}

/** The card of one `code-runner::snapshot` call. */
export function SnapshotCard(props: { message: CallMessage; phase: Phase }) {
  const input = record(props.message.input);
  const output = record(props.message.output);
  const runtimeId = text(input.runtime_id);
  const snapshotId = text(output.snapshot_id);
  const bytes = count(output.bytes);
  const done = props.phase === "done";
  const verdict = done ? (snapshotId ? "saved" : "nothing saved") : props.phase === "running" ? "saving…" : "not saved yet";
  return (
    <Card
      op="snapshot"
      tone={tone(props.phase, snapshotId !== undefined)}
      verdict={verdict}
      facts={bytes !== undefined ? <Fact>{formatBytes(bytes)}</Fact> : undefined}
    >
      {runtimeId && (
        <Section label="runtime">
          <div className="cr-row">
            <RuntimeChip id={runtimeId} />
            <span className="cr-row-text">runs on; the snapshot holds its variables, imports and /work as they are now</span>
          </div>
        </Section>
      )}
      {snapshotId && (
        <Section label="snapshot">
          <div className="cr-row">
            <SnapshotId id={snapshotId} />
            <span className="cr-row-text">code-runner::restore makes a new runtime from it, as often as you like</span>
          </div>
        </Section>
      )}
    </Card>
  );
}

/** The card of one `code-runner::restore` call. */
export function RestoreCard(props: { message: CallMessage; phase: Phase }) {
  const input = record(props.message.input);
  const output = record(props.message.output);
  const snapshotId = text(input.snapshot_id);
  const runtimeId = text(output.runtime_id);
  const done = props.phase === "done";
  const verdict = done ? (runtimeId ? "restored" : "not restored") : props.phase === "running" ? "restoring…" : "not restored yet";
  return (
    <Card op="restore" tone={tone(props.phase, runtimeId !== undefined)} verdict={verdict} facts={<Fact>fork</Fact>}>
      {snapshotId && (
        <Section label="from snapshot">
          <div className="cr-row">
            <SnapshotId id={snapshotId} />
          </div>
        </Section>
      )}
      {runtimeId && (
        <Section label="new runtime">
          <div className="cr-row">
            <RuntimeChip id={runtimeId} />
            <span className="cr-row-text">starts where the snapshot was, its random generators reseeded; the original runs on</span>
          </div>
        </Section>
      )}
    </Card>
  );
}
