//! Settling a turn: one mechanism, two policies.
//!
//! The worker's policy ([`ValuePolicy::Substitute`]) answers every finished
//! run with a response: a non-JSON result becomes `null`, an oversized one
//! the omission marker, an oversized stream head+tail. The seam's policy
//! ([`ValuePolicy::Lossless`]) never rewrites: the same facts become the
//! `invalid-output` and `output-limit` failures.

use serde_json::Value;

use crate::caps::{self, ImageCaps, OutputCaps};
use crate::engine::{Completion, FailureKind, Image, TurnEnding, TurnImages, TurnOutcome};
use crate::error::RunnerError;
use crate::wire::{RunResponse, Usage};

/// What to do with a completion JSON cannot carry, or one that is too large.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ValuePolicy {
    /// The worker's contract: `null` for non-JSON, the marker for oversize.
    Substitute(OutputCaps),
    /// The seam's contract: fail the run; `max_output_bytes` bounds logs plus value.
    Lossless {
        /// Cap on the serialized logs plus value or message; `None` disables it.
        max_output_bytes: Option<usize>,
    },
}

/// A settled completion: a value, or the failure the policy turned it into.
#[derive(Debug, Clone, PartialEq)]
pub enum Settled {
    /// The value to report (`Value::Null` for none under `Substitute`), and
    /// what the caller is told about it (the worker's `result_note`).
    Value(Option<Value>, Option<String>),
    /// The policy refused the completion.
    Failed(FailureKind, String),
}

/// Applies `policy` to a completion.
pub fn settle_completion(completion: Completion, policy: ValuePolicy) -> Settled {
    let capped = |value, caps: OutputCaps| caps::cap_result(value, caps.max_result_bytes);
    match (completion, policy) {
        (Completion::Absent, ValuePolicy::Substitute(_)) => Settled::Value(Some(Value::Null), None),
        (Completion::AbsentWithNote(note), ValuePolicy::Substitute(_)) => {
            Settled::Value(Some(Value::Null), Some(note))
        }
        (Completion::Absent | Completion::AbsentWithNote(_), ValuePolicy::Lossless { .. }) => {
            Settled::Value(None, None)
        }
        (Completion::Value(value), ValuePolicy::Substitute(caps)) => {
            Settled::Value(Some(capped(value, caps)), None)
        }
        (Completion::Converted { value, note, .. }, ValuePolicy::Substitute(caps)) => {
            Settled::Value(Some(capped(value, caps)), note)
        }
        (Completion::Value(value), ValuePolicy::Lossless { .. }) => {
            Settled::Value(Some(value), None)
        }
        (Completion::Converted { substituted, .. }, ValuePolicy::Lossless { .. }) => {
            Settled::Failed(
                FailureKind::InvalidOutput,
                crate::error::bound_message(format!(
                    "the completion value is not lossless JSON: {substituted}"
                )),
            )
        }
        (Completion::NotJson(why), ValuePolicy::Substitute(_)) => {
            Settled::Value(Some(Value::Null), Some(why))
        }
        (Completion::NotJson(why), ValuePolicy::Lossless { .. }) => Settled::Failed(
            FailureKind::InvalidOutput,
            crate::error::bound_message(format!(
                "the completion value is not lossless JSON: {why}"
            )),
        ),
        (Completion::Oversize { bytes, shape }, ValuePolicy::Substitute(caps)) => {
            match caps.max_result_bytes {
                Some(_) => Settled::Value(
                    Some(Value::String(caps::omitted_marker(bytes, &shape))),
                    None,
                ),
                None => Settled::Value(Some(Value::Null), None),
            }
        }
        (Completion::Oversize { bytes, .. }, ValuePolicy::Lossless { .. }) => Settled::Failed(
            FailureKind::OutputLimit,
            format!(
                "the completion value serialized to {bytes} bytes, over the engine's transfer limit"
            ),
        ),
    }
}

/// Settles a turn into the worker's `code-runner::run` response.
///
/// # Errors
/// The fault's contract error when the turn was stopped (timeout, memory…).
pub fn settle_response(
    outcome: TurnOutcome,
    caps: OutputCaps,
    duration_ms: u64,
    runtime_id: Option<String>,
) -> Result<RunResponse, RunnerError> {
    let usage = Usage {
        cpu_ms: (outcome.usage.cpu_ns / 1_000) as f64 / 1_000.0,
        peak_memory_bytes: outcome.usage.peak_memory_bytes,
        wall_ms: duration_ms,
        egress: None,
    };
    let (exit_code, completion) = match outcome.ending {
        TurnEnding::Faulted(fault) => {
            // What the program wrote before it was stopped goes beside the
            // error, capped as a response's output is.
            let output = crate::error::PartialOutput {
                stdout: outcome.stdout.render(),
                stderr: outcome.stderr.render(),
            };
            return Err(fault.to_runner_error().with_output(output));
        }
        TurnEnding::Exited {
            exit_code,
            completion,
            ..
        } => (exit_code, completion),
    };
    let (result, result_note) = match settle_completion(completion, ValuePolicy::Substitute(caps)) {
        Settled::Value(value, note) => (value.unwrap_or(Value::Null), note.map(bound_note)),
        Settled::Failed(..) => (Value::Null, None),
    };
    Ok(RunResponse {
        stdout: outcome.stdout.render(),
        stderr: outcome.stderr.render(),
        exit_code,
        success: exit_code == 0,
        duration_ms,
        result,
        runtime_id,
        usage,
        images: Vec::new(),
        files: Vec::new(),
        suspended: None,
        result_note,
        runtime_reset: None,
        restored: false,
    })
}

/// Longest `result_note`, in bytes: a sentence or two, its path cut long before.
pub const MAX_RESULT_NOTE_BYTES: usize = 2048;

fn bound_note(note: String) -> String {
    if note.len() <= MAX_RESULT_NOTE_BYTES {
        return note;
    }
    let end = note.floor_char_boundary(MAX_RESULT_NOTE_BYTES - 3);
    format!("{}…", &note[..end])
}

/// Applies the image caps to a turn's images: those that fit, in order (the
/// first that does not fit ends the list), then, when any was left out here
/// or by the engine, a `text/plain` omission marker saying how many and
/// naming the cap that ended the list.
pub fn cap_images(turn: TurnImages, caps: ImageCaps) -> Vec<Image> {
    let produced = turn.images.len();
    let (mut kept, mut bytes) = (Vec::new(), 0usize);
    let mut cut = ImageCut::Engine;
    for image in turn.images {
        let after = bytes.saturating_add(image.data.len());
        if let Some(max) = caps.max_images.filter(|max| kept.len() >= *max) {
            cut = ImageCut::Count(max);
            break;
        }
        if let Some(max) = caps.max_image_bytes.filter(|max| after > *max) {
            cut = ImageCut::Bytes(max);
            break;
        }
        bytes = after;
        kept.push(image);
    }
    let omitted = (produced - kept.len()).saturating_add(turn.omitted);
    if omitted > 0 {
        kept.push(Image {
            mime_type: "text/plain".into(),
            data: image_marker(omitted, cut),
        });
    }
    kept
}

/// The cap that ended a list of images.
#[derive(Debug, Clone, Copy)]
enum ImageCut {
    /// `max_images`.
    Count(usize),
    /// `max_image_bytes`.
    Bytes(usize),
    /// None of ours: the engine left them out (its own ceiling per turn).
    Engine,
}

/// The marker that ends a list of images `omitted` of which were left out
/// when `cut` ended it.
fn image_marker(omitted: usize, cut: ImageCut) -> String {
    let plural = if omitted == 1 { "" } else { "s" };
    let limits = match cut {
        ImageCut::Count(max) => format!("at most {max} images (max_images)"),
        ImageCut::Bytes(max) if max < 1024 => {
            format!("at most {max} bytes of image data (max_image_bytes)")
        }
        ImageCut::Bytes(max) => format!(
            "at most {} KB of image data (max_image_bytes)",
            caps::approx_kb(max as u64)
        ),
        ImageCut::Engine => "the engine's own ceiling".to_string(),
    };
    format!(
        "<omitted: {omitted} more image{plural}; a response carries {limits} — show fewer figures, \
         close the ones you do not need (plt.close), or lower their size or dpi>"
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::caps::{ResultShape, Stream, StreamBuffer};
    use crate::engine::Fault;
    use crate::error::ErrorCode;
    use serde_json::json;
    use std::time::Duration;

    fn outcome(ending: TurnEnding) -> TurnOutcome {
        let mut stdout = StreamBuffer::new(Stream::Stdout, Some(10));
        stdout.push(b"0123456789abcdef");
        TurnOutcome {
            usage: Default::default(),
            stdout,
            stderr: StreamBuffer::new(Stream::Stderr, Some(10)),
            ending,
            denied: false,
            interpreter_reset: false,
            went_back: false,
        }
    }

    /// The two policies disagree exactly where the contracts do.
    #[test]
    fn policies_diverge_on_non_json_and_oversize() {
        let sub = ValuePolicy::Substitute(OutputCaps::default());
        let lossless = ValuePolicy::Lossless {
            max_output_bytes: None,
        };
        let not_json = Completion::NotJson("result.x is a set; return a list".into());
        assert_eq!(
            settle_completion(not_json.clone(), sub),
            Settled::Value(
                Some(Value::Null),
                Some("result.x is a set; return a list".into())
            )
        );
        // A converted value is the worker's answer (with its note), the
        // seam's invalid-output.
        let converted = Completion::Converted {
            value: json!([null]),
            substituted: "result[0]: NaN became null".into(),
            note: None,
        };
        assert_eq!(
            settle_completion(converted.clone(), sub),
            Settled::Value(Some(json!([null])), None)
        );
        match settle_completion(converted, lossless) {
            Settled::Failed(FailureKind::InvalidOutput, why) => {
                assert!(why.contains("NaN became null"), "{why}")
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            settle_completion(not_json, lossless),
            Settled::Failed(FailureKind::InvalidOutput, _)
        ));
        let big = Completion::Oversize {
            bytes: 70_000_000,
            shape: ResultShape::Array(9),
        };
        match settle_completion(big.clone(), sub) {
            Settled::Value(Some(Value::String(s)), None) => {
                assert!(s.contains("(9 array elements)"))
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            settle_completion(big, lossless),
            Settled::Failed(FailureKind::OutputLimit, _)
        ));
    }

    /// A finished run is a response; exit_code and success are never touched by caps.
    #[test]
    fn response_carries_capped_streams_and_exit() {
        let ending = TurnEnding::Exited {
            exit_code: 3,
            completion: Completion::Value(json!("x".repeat(50))),
            exception: None,
        };
        let caps = OutputCaps {
            max_result_bytes: Some(10),
            max_stream_bytes: Some(10),
        };
        let response = settle_response(outcome(ending), caps, 7, None).unwrap();
        assert_eq!(response.exit_code, 3);
        assert!(!response.success);
        assert_eq!(response.duration_ms, 7);
        assert!(response.stdout.contains("[…stdout truncated"));
        assert!(
            response
                .result
                .as_str()
                .unwrap()
                .starts_with("<omitted: result was ~0 KB (a 50-char string)")
        );
    }

    /// A fault is a contract error, never a response.
    #[test]
    fn fault_becomes_its_contract_error() {
        let ending = TurnEnding::Faulted(Fault::Timeout {
            budget: Duration::from_millis(250),
        });
        let err = settle_response(outcome(ending), OutputCaps::default(), 1, None).unwrap_err();
        assert_eq!(err.code, ErrorCode::Timeout);
        assert!(err.message.contains("250 ms"));
    }

    fn png(bytes: usize) -> Image {
        Image {
            mime_type: "image/png".into(),
            data: "A".repeat(bytes),
        }
    }

    /// Images are kept in order up to the count and byte caps; the first
    /// that does not fit ends the list with a marker counting the rest,
    /// the engine's own omissions included.
    #[test]
    fn images_are_capped_in_order_with_a_marker() {
        let turn = |n: usize, omitted: usize| TurnImages {
            images: (1..=n).map(|i| png(i * 10)).collect(),
            omitted,
        };
        let caps = |images, bytes| ImageCaps {
            max_images: images,
            max_image_bytes: bytes,
        };
        let all = cap_images(turn(3, 0), caps(Some(8), Some(1000)));
        assert_eq!(
            all.iter().map(|i| i.data.len()).collect::<Vec<_>>(),
            [10, 20, 30]
        );
        let counted = cap_images(turn(5, 0), caps(Some(2), None));
        assert_eq!(counted.len(), 3);
        assert_eq!(counted[2].mime_type, "text/plain");
        assert!(
            counted[2].data.contains("3 more images"),
            "{}",
            counted[2].data
        );
        assert!(
            counted[2].data.contains("at most 2 images (max_images)"),
            "{}",
            counted[2].data
        );
        assert!(
            !counted[2].data.contains("image data"),
            "{}",
            counted[2].data
        );
        // 10 + 20 fit in 35 bytes, 30 does not, and nothing after it is
        // taken: the size cap cut it, with the count cap far off, and the
        // marker names the size cap only.
        let sized = cap_images(turn(4, 0), caps(Some(8), Some(35)));
        assert_eq!(sized.len(), 3);
        assert!(sized[2].data.contains("2 more images"), "{}", sized[2].data);
        assert!(
            sized[2]
                .data
                .contains("at most 35 bytes of image data (max_image_bytes)"),
            "{}",
            sized[2].data
        );
        assert!(!sized[2].data.contains("8 images"), "{}", sized[2].data);
        let big = TurnImages {
            images: vec![png(3000), png(3000)],
            omitted: 0,
        };
        let kb = cap_images(big, caps(Some(8), Some(4096)));
        assert!(
            kb[1]
                .data
                .contains("1 more image; a response carries at most 4 KB of image data"),
            "{}",
            kb[1].data
        );
        let engine = cap_images(turn(1, 1), caps(None, None));
        assert_eq!(engine.len(), 2);
        assert!(
            engine[1].data.contains("1 more image;"),
            "{}",
            engine[1].data
        );
        assert!(
            engine[1].data.contains("engine's own ceiling"),
            "{}",
            engine[1].data
        );
        assert!(cap_images(TurnImages::default(), ImageCaps::default()).is_empty());
    }
}
