// Files a run takes and the globs it collects: a file input (names and sizes
// listed, each removable) and a collect field. Attached files go into the run's
// `files` (UTF-8 as text, anything else as base64); what comes back is listed
// on the run's card with a download button.

import { useState } from "react";
import { formatBytes } from "../function-trigger-message/files";

/** A file as the run request carries it. */
export interface Attached {
  path: string;
  size: number;
  text?: string;
  base64?: string;
}

/** Most bytes attached at once: no request body past the server's 16 MiB cap could carry more. */
export const MAX_ATTACHED_BYTES = 16 * 1024 * 1024;

function toBase64(bytes: Uint8Array): string {
  let binary = "";
  for (let at = 0; at < bytes.length; at += 0x8000) binary += String.fromCharCode(...bytes.subarray(at, at + 0x8000));
  return btoa(binary);
}

/** A browser File as a request's file: text when it is valid UTF-8, else base64. */
export async function attach(file: File): Promise<Attached> {
  const bytes = new Uint8Array(await file.arrayBuffer());
  try {
    return { path: file.name, size: bytes.length, text: new TextDecoder("utf-8", { fatal: true }).decode(bytes) };
  } catch {
    return { path: file.name, size: bytes.length, base64: toBase64(bytes) };
  }
}

/** The request's fields for `attached` and the collect field's text. */
export function filesAndCollect(attached: Attached[], collect: string): Record<string, unknown> {
  const fields: Record<string, unknown> = {};
  if (attached.length > 0) fields.files = attached.map(({ path, text, base64 }) => (text !== undefined ? { path, text } : { path, base64 }));
  const globs = collect
    .split(",")
    .map((glob) => glob.trim())
    .filter((glob) => glob !== "");
  if (globs.length > 0) fields.collect = globs;
  return fields;
}

export function Attach(props: {
  attached: Attached[];
  onChange(attached: Attached[]): void;
  collect: string;
  onCollect(collect: string): void;
}) {
  const [refused, setRefused] = useState("");
  const add = async (list: FileList | null) => {
    const picked = await Promise.all([...(list ?? [])].map(attach));
    const names = new Set(picked.map((file) => file.path));
    const next = [...props.attached.filter((file) => !names.has(file.path)), ...picked];
    const total = next.reduce((sum, file) => sum + file.size, 0);
    if (total > MAX_ATTACHED_BYTES) {
      setRefused(`not attached: ${formatBytes(total)} in all is more than a request carries (${formatBytes(MAX_ATTACHED_BYTES)})`);
      return;
    }
    setRefused("");
    props.onChange(next);
  };
  return (
    <div className="pg-files" aria-label="files">
      <label className="pg-field-inline">
        attach files
        <input
          type="file"
          multiple
          onChange={(event) => {
            void add(event.target.files);
            event.target.value = "";
          }}
        />
      </label>
      {refused && <p className="pg-hint">{refused}</p>}
      {props.attached.length > 0 && (
        <ul className="pg-attached" aria-label="attached files">
          {props.attached.map((file) => (
            <li key={file.path} className="pg-attached-row">
              <span className="pg-fn">{file.path}</span>
              <span className="pg-kept-lang">{formatBytes(file.size)}</span>
              <button type="button" aria-label={`remove ${file.path}`} onClick={() => props.onChange(props.attached.filter((other) => other.path !== file.path))}>
                Remove
              </button>
            </li>
          ))}
        </ul>
      )}
      <label className="pg-field">
        collect (globs, comma-separated)
        <input placeholder="out/*.csv, report.md" value={props.collect} onChange={(event) => props.onCollect(event.target.value)} spellCheck={false} />
      </label>
    </div>
  );
}
