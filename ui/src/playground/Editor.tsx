// A code editor: a transparent textarea over a highlighted copy of its text.
// Tab indents (Escape first to leave with Tab), Ctrl/Cmd+Enter submits.

import { useMemo, useRef, type KeyboardEvent } from "react";
import { tokenize, type Lang } from "../lib/highlight";
import { Tokens } from "../lib/shared";

export function Editor(props: {
  label: string;
  lang: Lang;
  value: string;
  onChange(value: string): void;
  onSubmit?(): void;
  minLines?: number;
}) {
  const tokens = useMemo(() => tokenize(props.value, props.lang), [props.value, props.lang]);
  const leaving = useRef(false);
  const area = useRef<HTMLTextAreaElement>(null);

  const onKeyDown = (event: KeyboardEvent<HTMLTextAreaElement>) => {
    if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) {
      event.preventDefault();
      props.onSubmit?.();
      return;
    }
    if (event.key === "Escape") {
      leaving.current = true;
      return;
    }
    if (event.key === "Tab" && !event.shiftKey && !leaving.current) {
      event.preventDefault();
      const target = event.currentTarget;
      const indent = props.lang === "python" ? "    " : "  ";
      const { selectionStart: start, selectionEnd: end, value } = target;
      props.onChange(value.slice(0, start) + indent + value.slice(end));
      requestAnimationFrame(() => {
        area.current?.setSelectionRange(start + indent.length, start + indent.length);
      });
      return;
    }
    leaving.current = false;
  };

  return (
    <div className="pg-editor" style={{ ["--pg-lines" as string]: props.minLines ?? 10 }}>
      <pre className="pg-editor-hl" aria-hidden="true">
        <Tokens tokens={tokens} />
        {"\n "}
      </pre>
      <textarea
        ref={area}
        aria-label={props.label}
        spellCheck={false}
        autoCapitalize="off"
        autoComplete="off"
        autoCorrect="off"
        wrap="off"
        value={props.value}
        onChange={(event) => props.onChange(event.target.value)}
        onKeyDown={onKeyDown}
      />
    </div>
  );
}
