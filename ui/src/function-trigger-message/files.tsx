// A run's files: those the call uploaded (`files`) and those it collected back
// (`files` in the answer), by name and size, at most MAX_LISTED of each and then
// "+k more". A collected file downloads on click: a Blob made from its base64,
// named by the last part of its path, with the MIME type the worker gave.

import { redactText } from "../lib/redact";
import { Note, Section, count, record, text } from "../lib/shared";

/** Names listed per direction; the rest are counted ("+k more"). */
export const MAX_LISTED = 20;

const BASE64 = /^[A-Za-z0-9+/]*={0,2}$/;

/** Bytes as the card shows them: B, KB, MB, GB (powers of 1024). */
export function formatBytes(bytes: number): string {
  if (bytes < 1024) return `${bytes} B`;
  const units = ["KB", "MB", "GB"];
  let value = bytes / 1024;
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit += 1;
  }
  return `${value < 10 ? value.toFixed(1) : Math.round(value)} ${units[unit]}`;
}

/** The bytes a base64 string decodes to. */
function decodedLength(base64: string): number {
  const padding = base64.endsWith("==") ? 2 : base64.endsWith("=") ? 1 : 0;
  return Math.max(0, Math.floor((base64.length * 3) / 4) - padding);
}

/** An uploaded file's size: its text's UTF-8 length, or its base64's decoded length. */
function uploadedSize(file: Record<string, unknown>): number | undefined {
  const body = text(file.text);
  if (body !== undefined) return new TextEncoder().encode(body).length;
  const base64 = text(file.base64);
  return base64 !== undefined ? decodedLength(base64) : undefined;
}

/** Saves a collected file: a Blob of its bytes behind a temporary download link. */
export function download(path: string, mime: string, base64: string) {
  const binary = atob(base64);
  const bytes = new Uint8Array(binary.length);
  for (let i = 0; i < binary.length; i += 1) bytes[i] = binary.charCodeAt(i);
  const url = URL.createObjectURL(new Blob([bytes], { type: mime || "application/octet-stream" }));
  const link = document.createElement("a");
  link.href = url;
  link.download = redactText(path.split("/").pop() || "file");
  document.body.append(link);
  link.click();
  link.remove();
  setTimeout(() => URL.revokeObjectURL(url), 60_000);
}

function More(props: { hidden: number }) {
  if (props.hidden <= 0) return null;
  return <li className="cr-file cr-quiet">+{props.hidden} more</li>;
}

/** The uploaded and collected files of a run, or nothing when it had none. */
export function Files(props: { input: Record<string, unknown>; output: Record<string, unknown>; done: boolean }) {
  const uploaded = Array.isArray(props.input.files) ? props.input.files.map(record) : [];
  const answered = props.done && Array.isArray(props.output.files) ? props.output.files.map(record) : [];
  const collected = answered.filter((file) => text(file.path) !== "");
  const markers = answered.filter((file) => text(file.path) === "");
  if (uploaded.length === 0 && answered.length === 0) return null;
  return (
    <Section label="files" aside={`${uploaded.length} in · ${collected.length} out`}>
      {uploaded.length > 0 && (
        <ul className="cr-files" aria-label="uploaded files">
          {uploaded.slice(0, MAX_LISTED).map((file, index) => {
            const size = uploadedSize(file);
            return (
              <li className="cr-file" key={index}>
                <span className="cr-file-dir">in</span>
                <span className="cr-file-name">{redactText(text(file.path) ?? "?")}</span>
                {size !== undefined && <span className="cr-file-size">{formatBytes(size)}</span>}
              </li>
            );
          })}
          <More hidden={uploaded.length - MAX_LISTED} />
        </ul>
      )}
      {collected.length > 0 && (
        <ul className="cr-files" aria-label="collected files">
          {collected.slice(0, MAX_LISTED).map((file, index) => {
            const path = text(file.path) ?? "";
            const mime = text(file.mime_type) ?? "";
            const base64 = text(file.base64) ?? "";
            const size = count(file.size);
            return (
              <li className="cr-file" key={index}>
                <span className="cr-file-dir">out</span>
                <span className="cr-file-name">{redactText(path)}</span>
                {size !== undefined && <span className="cr-file-size">{formatBytes(size)}</span>}
                {BASE64.test(base64) && (
                  <button type="button" className="cr-file-download" title={mime} onClick={() => download(path, mime, base64)}>
                    download
                  </button>
                )}
              </li>
            );
          })}
          <More hidden={collected.length - MAX_LISTED} />
        </ul>
      )}
      {markers.map((marker, index) => (
        <Note key={index}>{redactText(text(marker.base64) ?? "")}</Note>
      ))}
    </Section>
  );
}
