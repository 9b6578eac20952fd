//! Output caps: one implementation for every engine.
//!
//! Streams are bounded *while the guest runs* by [`StreamBuffer`], which keeps
//! only the head and tail the rendered text can show; results are replaced
//! whole by an omission marker ([`omitted_marker`]) rather than reshaped.

use std::collections::VecDeque;
use std::io::Write;
use std::sync::Arc;

use serde_json::Value;

/// Share of a stream's budget kept from its start; the rest comes from its end.
const HEAD_PERCENT: usize = 60;

/// Hard ceiling on a stream the host will hold when `max_stream_bytes` is 0.
///
/// "0 disables" turns off the contract cap, not host safety: a guest printing
/// in a loop still cannot grow host memory past this.
pub const UNCAPPED_STREAM_CEILING: usize = 16 * 1024 * 1024;

/// The two per-run caps, `None` when disabled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OutputCaps {
    /// Ceiling on the serialized result (default 32768 bytes).
    pub max_result_bytes: Option<usize>,
    /// Ceiling on each of stdout and stderr (default 16384 bytes).
    pub max_stream_bytes: Option<usize>,
}

impl Default for OutputCaps {
    fn default() -> Self {
        OutputCaps {
            max_result_bytes: Some(32_768),
            max_stream_bytes: Some(16_384),
        }
    }
}

/// The image caps of a run response, `None` when disabled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ImageCaps {
    /// Most images one response carries (default 8).
    pub max_images: Option<usize>,
    /// Most image data one response carries, in base64 bytes (default 4 MiB).
    pub max_image_bytes: Option<usize>,
}

impl Default for ImageCaps {
    fn default() -> Self {
        ImageCaps {
            max_images: Some(8),
            max_image_bytes: Some(4 * 1024 * 1024),
        }
    }
}

/// Which stream a buffer captures; its name appears in the truncation marker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stream {
    /// Standard output.
    Stdout,
    /// Standard error.
    Stderr,
}

impl Stream {
    fn name(self) -> &'static str {
        match self {
            Stream::Stdout => "stdout",
            Stream::Stderr => "stderr",
        }
    }
}

/// Where a turn's output goes while the guest writes it, beside its
/// buffers: a caller that streams (an MCP progress notification, a
/// server-sent event). It gets only what enters a buffer's head, so it never
/// sees more than the head budget of a stream, however much is written; the
/// tail and the truncation marker arrive with the answer. Called on the
/// engine's thread: it must only hand the bytes on.
#[derive(Clone)]
pub struct LiveOutput(Arc<Sink>);

/// What a [`LiveOutput`] calls with each piece of output.
type Sink = dyn Fn(Stream, &[u8]) + Send + Sync;

impl LiveOutput {
    /// A tap that calls `sink` with each piece of output as it is written.
    pub fn new(sink: impl Fn(Stream, &[u8]) + Send + Sync + 'static) -> Self {
        LiveOutput(Arc::new(sink))
    }

    /// Hands `bytes` of `stream` to the sink.
    pub fn call(&self, stream: Stream, bytes: &[u8]) {
        (self.0)(stream, bytes);
    }
}

impl std::fmt::Debug for LiveOutput {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("LiveOutput")
    }
}

/// A bounded capture of one output stream: the first 60 % and last 40 % of
/// its budget, plus the total byte count.
///
/// Memory held never exceeds the budget, however much the guest writes.
#[derive(Debug, Clone)]
pub struct StreamBuffer {
    stream: Stream,
    head_budget: usize,
    tail_budget: usize,
    head: Vec<u8>,
    tail: VecDeque<u8>,
    total: u64,
    live: Option<LiveOutput>,
}

impl StreamBuffer {
    /// A buffer for `stream` that keeps at most `cap` bytes (`None`: the hard ceiling).
    pub fn new(stream: Stream, cap: Option<usize>) -> Self {
        let budget = cap.unwrap_or(UNCAPPED_STREAM_CEILING);
        let head_budget = budget / 100 * HEAD_PERCENT + budget % 100 * HEAD_PERCENT / 100;
        StreamBuffer {
            stream,
            head_budget,
            tail_budget: budget - head_budget,
            head: Vec::new(),
            tail: VecDeque::new(),
            total: 0,
            live: None,
        }
    }

    /// [`StreamBuffer::new`], handing what enters the head to `live` too.
    pub fn with_live(stream: Stream, cap: Option<usize>, live: Option<LiveOutput>) -> Self {
        StreamBuffer {
            live,
            ..StreamBuffer::new(stream, cap)
        }
    }

    /// Appends guest output, discarding the middle once the budget is full.
    pub fn push(&mut self, mut bytes: &[u8]) {
        self.total = self.total.saturating_add(bytes.len() as u64);
        let room = self.head_budget - self.head.len();
        if room > 0 {
            let take = room.min(bytes.len());
            self.head.extend_from_slice(&bytes[..take]);
            if let Some(live) = &self.live
                && take > 0
            {
                live.call(self.stream, &bytes[..take]);
            }
            bytes = &bytes[take..];
        }
        if bytes.len() >= self.tail_budget {
            self.tail.clear();
            self.tail.extend(&bytes[bytes.len() - self.tail_budget..]);
            return;
        }
        let overflow = (self.tail.len() + bytes.len()).saturating_sub(self.tail_budget);
        self.tail.drain(..overflow);
        self.tail.extend(bytes);
    }

    /// The bytes kept from the start, those kept from the end, and the
    /// total written: what a buffer is, to carry it across a process
    /// boundary ([`StreamBuffer::from_parts`] rebuilds it).
    pub fn parts(&self) -> (&[u8], Vec<u8>, u64) {
        (&self.head, self.tail.iter().copied().collect(), self.total)
    }

    /// A buffer for `stream` with budget `cap` holding what another
    /// buffer's [`StreamBuffer::parts`] gave. Parts larger than this
    /// budget are cut as [`StreamBuffer::push`] would have kept them (the
    /// head's start, the tail's end), and the total is at least what is
    /// held, so a hostile sender can neither grow the buffer past its budget
    /// nor make it claim less than it holds.
    pub fn from_parts(
        stream: Stream,
        cap: Option<usize>,
        mut head: Vec<u8>,
        tail: Vec<u8>,
        total: u64,
    ) -> Self {
        let mut buffer = StreamBuffer::new(stream, cap);
        head.truncate(buffer.head_budget);
        let skip = tail.len().saturating_sub(buffer.tail_budget);
        buffer.tail = tail[skip..].iter().copied().collect();
        buffer.total = total.max((head.len() + buffer.tail.len()) as u64);
        buffer.head = head;
        buffer
    }

    /// Bytes written so far, including those discarded.
    pub fn total_bytes(&self) -> u64 {
        self.total
    }

    /// Whether anything was discarded.
    pub fn truncated(&self) -> bool {
        self.total > (self.head.len() + self.tail.len()) as u64
    }

    /// The text a response carries: everything, or head, marker and tail.
    pub fn render(&self) -> String {
        let (tail_a, tail_b) = self.tail.as_slices();
        if !self.truncated() {
            let mut all = Vec::with_capacity(self.head.len() + self.tail.len());
            all.extend_from_slice(&self.head);
            all.extend_from_slice(tail_a);
            all.extend_from_slice(tail_b);
            return String::from_utf8_lossy(&all).into_owned();
        }
        let mut tail = Vec::with_capacity(self.tail.len());
        tail.extend_from_slice(tail_a);
        tail.extend_from_slice(tail_b);
        let head = trim_incomplete_end(&self.head);
        let tail = skip_continuation_start(&tail);
        format!(
            "{}\n[…{} truncated: was ~{} KB; middle omitted]\n{}",
            String::from_utf8_lossy(head),
            self.stream.name(),
            approx_kb(self.total),
            String::from_utf8_lossy(tail),
        )
    }
}

/// Drops a UTF-8 sequence cut short at the end of `bytes`.
fn trim_incomplete_end(bytes: &[u8]) -> &[u8] {
    match std::str::from_utf8(bytes) {
        Err(err) if err.error_len().is_none() => &bytes[..err.valid_up_to()],
        _ => bytes,
    }
}

/// Skips continuation bytes of a character whose start was discarded.
fn skip_continuation_start(bytes: &[u8]) -> &[u8] {
    let skip = bytes
        .iter()
        .take(3)
        .take_while(|b| (**b & 0xC0) == 0x80)
        .count();
    &bytes[skip..]
}

/// Rounds a byte count to kibibytes, as the markers print them.
pub fn approx_kb(bytes: u64) -> u64 {
    bytes.saturating_add(512) / 1024
}

/// What the omission marker says about a dropped result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ResultShape {
    /// An array of this many elements.
    Array(u64),
    /// An object of this many keys.
    Object(u64),
    /// A string of this many characters.
    String(u64),
    /// Anything else (a number with very many digits).
    Scalar,
}

impl ResultShape {
    /// The shape of a JSON value.
    pub fn of(value: &Value) -> ResultShape {
        match value {
            Value::Array(items) => ResultShape::Array(items.len() as u64),
            Value::Object(map) => ResultShape::Object(map.len() as u64),
            Value::String(text) => ResultShape::String(text.chars().count() as u64),
            _ => ResultShape::Scalar,
        }
    }

    fn describe(&self) -> String {
        match self {
            ResultShape::Array(n) => format!("{n} array elements"),
            ResultShape::Object(n) => format!("{n} object keys"),
            ResultShape::String(n) => format!("a {n}-char string"),
            ResultShape::Scalar => "a scalar".to_string(),
        }
    }
}

/// The marker that replaces a result of `bytes` serialized bytes and `shape`.
pub fn omitted_marker(bytes: u64, shape: &ResultShape) -> String {
    format!(
        "<omitted: result was ~{} KB ({}); returning it whole would flood the model context — \
         print a slice, aggregate in code, or write it to iii.files and return a summary>",
        approx_kb(bytes),
        shape.describe()
    )
}

/// The compact serialized size of a JSON value, without building the text.
pub fn serialized_len(value: &Value) -> u64 {
    struct Count(u64);
    impl Write for Count {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0 += buf.len() as u64;
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut count = Count(0);
    // Serializing a `Value` to a writer that never fails cannot fail.
    let _ = serde_json::to_writer(&mut count, value);
    count.0
}

/// Applies `max_result_bytes`: the value itself, or the omission marker in its place.
pub fn cap_result(value: Value, max_result_bytes: Option<usize>) -> Value {
    let Some(max) = max_result_bytes else {
        return value;
    };
    let bytes = serialized_len(&value);
    if bytes <= max as u64 {
        return value;
    }
    Value::String(omitted_marker(bytes, &ResultShape::of(&value)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The seed's own example: 100 000 integers become a ~575 KB marker.
    #[test]
    fn oversized_array_becomes_the_documented_marker() {
        let value = Value::Array((0..100_000).map(|i| json!(i)).collect());
        let capped = cap_result(value, Some(32_768));
        let text = capped.as_str().unwrap();
        assert!(
            text.starts_with("<omitted: result was ~575 KB (100000 array elements); "),
            "{text}"
        );
        assert!(text.ends_with("write it to iii.files and return a summary>"));
    }

    /// Strings and objects name their own shape; small results pass untouched.
    #[test]
    fn shapes_and_small_results() {
        let long = cap_result(json!("é".repeat(40_000)), Some(32_768));
        assert!(long.as_str().unwrap().contains("(a 40000-char string)"));
        let map: serde_json::Map<String, Value> =
            (0..5000).map(|i| (format!("key{i}"), json!(i))).collect();
        let obj = cap_result(Value::Object(map), Some(32_768));
        assert!(obj.as_str().unwrap().contains("(5000 object keys)"));
        assert_eq!(cap_result(json!([1, 2]), Some(32_768)), json!([1, 2]));
        let big = json!("x".repeat(100_000));
        assert_eq!(cap_result(big.clone(), None), big);
    }

    /// Head 60 %, tail 40 %, marker between; memory never exceeds the budget.
    #[test]
    fn stream_keeps_head_and_tail_around_marker() {
        let mut buf = StreamBuffer::new(Stream::Stdout, Some(100));
        for i in 0..10_000u32 {
            buf.push(format!("{i:05}\n").as_bytes());
            assert!(buf.head.len() + buf.tail.len() <= 100);
        }
        let text = buf.render();
        assert!(text.starts_with("00000\n00001\n"), "{text}");
        assert!(
            text.contains("\n[…stdout truncated: was ~59 KB; middle omitted]\n"),
            "{text}"
        );
        assert!(text.ends_with("09999\n"), "{text}");
        assert_eq!(buf.total_bytes(), 60_000);
    }

    /// Under the cap nothing changes; stderr's marker names stderr.
    #[test]
    fn small_stream_is_verbatim_and_stderr_names_itself() {
        let mut buf = StreamBuffer::new(Stream::Stderr, Some(100));
        buf.push(b"hello ");
        buf.push("wörld".as_bytes());
        assert_eq!(buf.render(), "hello wörld");
        buf.push(&[b'x'; 200]);
        assert!(
            buf.render()
                .contains("[…stderr truncated: was ~0 KB; middle omitted]")
        );
    }

    /// A buffer rebuilt from its parts renders the same text, marker and
    /// all; oversize parts are cut to the budget.
    #[test]
    fn parts_rebuild_the_same_buffer() {
        for count in [3u32, 10_000] {
            let mut buf = StreamBuffer::new(Stream::Stdout, Some(100));
            for i in 0..count {
                buf.push(format!("{i:05}\n").as_bytes());
            }
            let (head, tail, total) = buf.parts();
            let back =
                StreamBuffer::from_parts(Stream::Stdout, Some(100), head.to_vec(), tail, total);
            assert_eq!(back.render(), buf.render());
            assert_eq!(back.total_bytes(), buf.total_bytes());
            assert_eq!(back.truncated(), buf.truncated());
        }
        let hostile =
            StreamBuffer::from_parts(Stream::Stderr, Some(10), vec![b'h'; 50], vec![b't'; 50], 0);
        assert_eq!(hostile.head.len() + hostile.tail.len(), 10);
        assert!(hostile.total_bytes() >= 10);
    }

    /// A cut through a multi-byte character never yields a replacement char.
    #[test]
    fn truncation_respects_utf8_boundaries() {
        let mut buf = StreamBuffer::new(Stream::Stdout, Some(11));
        buf.push("ééééééééééééééééééééé".as_bytes());
        let text = buf.render();
        assert!(!text.contains('\u{FFFD}'), "{text}");
    }
}
