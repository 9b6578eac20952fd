//! What the host gives a data-flavour instance: its store data
//! ([`DataHost`]), its WASI context, and the linker: wasmtime-wasi preview 1,
//! our filesystem and clock shadows ([`super::fs`]), and the door
//! (`host.call`), which carries the turn's task, its end and its binding calls.

use std::sync::Arc;
use std::time::Instant;

use code_runner_core::caps::Stream;
use code_runner_core::{BindingError, RuntimeOptions};
use wasmtime::{Caller, Extern, Linker};
use wasmtime_wasi::p1::WasiP1Ctx;
use wasmtime_wasi::{FsPerms, WasiCtxBuilder};

use super::artifact::{DataArtifacts, LIB_GUEST, MPL_DATA_GUEST};
use super::trampoline::Originals;
use super::wasi::FsGuard;
use crate::control::{Link, SLICE, Stop, TurnLimits};
use crate::host::{HeldGauge, MemoryLimiter};
use crate::output::{GuestOutput, SharedStreams};
use crate::packages::PACKAGES_GUEST;
use crate::protocol;

/// The door's answers: success, no host bound, a fault (the guest raises `OSError`).
const DOOR_OK: i32 = 0;
const DOOR_FAULT: i32 = -2;

/// What a turn's door carries besides binding calls.
#[derive(Default)]
pub struct Door {
    /// The task frame, handed out once per turn.
    pub task: Option<String>,
    /// The turn's end as the runner reported it.
    pub end: Option<End>,
    /// The largest result text this runtime hands over.
    pub max_result: usize,
}

/// The store's data of a data-flavour instance.
pub struct DataHost {
    pub(crate) wasi: WasiP1Ctx,
    pub(crate) fs: FsGuard,
    pub(crate) originals: Option<Originals>,
    pub(crate) limiter: MemoryLimiter,
    pub(crate) streams: SharedStreams,
    pub(crate) turn: Option<TurnLimits>,
    pub(crate) stop: Option<Stop>,
    pub(crate) door: Door,
    pub(crate) link: Arc<Link>,
    pub(crate) runtime: tokio::runtime::Handle,
    pub(crate) clock_base: GuestClock,
}

/// An instance's monotonic clock: what the guest reads (`time.monotonic()`,
/// through WASI's `clock_time_get`) and what its sleeps count from are one
/// clock, counted from a base a restore may move so the reading continues
/// from a snapshot's (never back).
#[derive(Clone)]
pub struct GuestClock(Arc<std::sync::Mutex<Instant>>);

impl GuestClock {
    /// A clock reading zero now.
    pub fn new() -> GuestClock {
        GuestClock(Arc::new(std::sync::Mutex::new(Instant::now())))
    }

    /// When it read zero.
    pub fn base(&self) -> Instant {
        *self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Makes it read `reading` now.
    pub fn set_reading(&self, reading: std::time::Duration) {
        *self.0.lock().unwrap_or_else(|p| p.into_inner()) = Instant::now()
            .checked_sub(reading)
            .unwrap_or_else(Instant::now);
    }
}

impl wasmtime_wasi::HostMonotonicClock for GuestClock {
    fn resolution(&self) -> u64 {
        1
    }

    fn now(&self) -> u64 {
        u64::try_from(self.base().elapsed().as_nanos()).unwrap_or(u64::MAX)
    }
}

impl DataHost {
    /// Whether the guest must stop now, and why.
    pub fn should_stop(&self) -> Option<Stop> {
        crate::control::stop_reason(&self.link, self.turn.as_ref())
    }
}

impl super::wasi::FsHost for DataHost {
    fn fs(&mut self) -> &mut FsGuard {
        &mut self.fs
    }

    fn fs_ref(&self) -> &FsGuard {
        &self.fs
    }

    fn originals(&self) -> Option<&Originals> {
        self.originals.as_ref()
    }

    fn stop_now(&mut self) -> Option<Stop> {
        let stop = self.should_stop()?;
        self.stop = Some(stop.clone());
        Some(stop)
    }

    fn clock_base(&self) -> Instant {
        self.clock_base.base()
    }
}

/// How many preopens an instance has: three, and the packages' when there are some.
pub fn preopens(packages: bool) -> i32 {
    3 + i32::from(packages)
}

/// The WASI context of one instance: the three preopens in the order the
/// image was made with (descriptors 3, 4, 5; the operator's packages 6),
/// output into the turn's buffers, nothing inherited.
pub fn wasi_ctx(
    artifacts: &DataArtifacts,
    packages: Option<&std::path::Path>,
    work_dir: &std::path::Path,
    read_only: bool,
    streams: &SharedStreams,
    clock: &GuestClock,
) -> Result<WasiP1Ctx, String> {
    let mut builder = WasiCtxBuilder::new();
    builder
        .allow_blocking_current_thread(true)
        .monotonic_clock(clock.clone())
        .stdout(GuestOutput::new(streams.clone(), Stream::Stdout))
        .stderr(GuestOutput::new(streams.clone(), Stream::Stderr));
    builder
        .preopened_dir(&artifacts.lib, LIB_GUEST, FsPerms::ReadOnly)
        .map_err(|err| format!("cannot mount {}: {err:#}", artifacts.lib.display()))?;
    builder
        .preopened_dir(&artifacts.mpl_data, MPL_DATA_GUEST, FsPerms::ReadOnly)
        .map_err(|err| format!("cannot mount {}: {err:#}", artifacts.mpl_data.display()))?;
    let perms = if read_only {
        FsPerms::ReadOnly
    } else {
        FsPerms::ReadWrite
    };
    builder
        .preopened_dir(work_dir, "/work", perms)
        .map_err(|err| format!("cannot mount {} as /work: {err:#}", work_dir.display()))?;
    if let Some(packages) = packages {
        builder
            .preopened_dir(packages, PACKAGES_GUEST, FsPerms::ReadOnly)
            .map_err(|err| format!("cannot mount {}: {err:#}", packages.display()))?;
    }
    Ok(builder.build_p1())
}

/// The memory ceiling of an instance: the image's own memory plus
/// `memory_mb`, over all the store's memories together.
pub fn memory_limiter(
    options: &RuntimeOptions,
    base_bytes: usize,
    gauge: HeldGauge,
) -> MemoryLimiter {
    MemoryLimiter {
        held: 0,
        gauge,
        max_bytes: base_bytes.saturating_add((options.memory_mb as usize).saturating_mul(1 << 20)),
        hit: false,
        total: Some(0),
    }
}

fn stop_trap(caller: &mut Caller<'_, DataHost>, stop: Stop) -> wasmtime::Error {
    caller.data_mut().stop = Some(stop);
    wasmtime::Error::msg("code-runner stopped the guest")
}

/// The linker every instance is made from: wasmtime-wasi preview 1, our
/// shadows over it, and the door. `base` is the unshadowed one, which the
/// shadows delegate to through their trampolines.
pub fn linkers(
    engine: &wasmtime::Engine,
) -> wasmtime::Result<(Linker<DataHost>, Linker<DataHost>)> {
    let mut base = Linker::new(engine);
    wasmtime_wasi::p1::add_to_linker_sync(&mut base, |host: &mut DataHost| &mut host.wasi)?;
    let mut linker = base.clone();
    super::fs::add_shadows(&mut linker)?;
    linker.func_wrap("host", "call", door)?;
    Ok((linker, base))
}

/// `host.call(ptr, len, out_ptr_ptr, out_len_ptr) -> 0 | -1 | -2`: one frame
/// in, the host's answer written into memory the guest's `host_alloc` gave.
fn door(
    mut caller: Caller<'_, DataHost>,
    ptr: i32,
    len: i32,
    out_ptr: i32,
    out_len: i32,
) -> wasmtime::Result<i32> {
    let Some(memory) = caller.get_export("memory").and_then(Extern::into_memory) else {
        return Ok(DOOR_FAULT);
    };
    let (ptr, len) = (ptr as u32 as usize, len as u32 as usize);
    // Every frame is bounded before a byte of it is copied out.
    let limit = 2
        + protocol::MAX_HEAD
        + caller.data().door.max_result.max(protocol::MAX_CALL)
        + MAX_IMAGE_TEXT
        + 2 * MAX_IMAGES
        + 32;
    if len == 0 || len > limit {
        let stop = Stop::Protocol(format!("a door frame of {len} bytes"));
        return Err(stop_trap(&mut caller, stop));
    }
    let mut frame = vec![0u8; len];
    if memory.read(&caller, ptr, &mut frame).is_err() {
        return Ok(DOOR_FAULT);
    }
    let answer = match frame.first() {
        Some(b'T') => match caller.data_mut().door.task.take() {
            Some(task) => task.into_bytes(),
            None => return Ok(DOOR_FAULT),
        },
        Some(b'E') => match end_frame(&frame[1..], caller.data().door.max_result) {
            Ok(end) => {
                caller.data_mut().door.end = Some(end);
                b"k".to_vec()
            }
            Err(message) => return Err(stop_trap(&mut caller, Stop::Protocol(message))),
        },
        Some(b'C') => {
            let reply = match std::str::from_utf8(&frame[1..]) {
                Ok(text) => binding_call(&mut caller, text),
                Err(_) => Ok(protocol::reply(Err(BindingError::message(
                    "a binding call frame is not UTF-8",
                )))),
            };
            match reply {
                Ok(reply) => reply.into_bytes(),
                Err(stop) => return Err(stop_trap(&mut caller, stop)),
            }
        }
        _ => return Ok(DOOR_FAULT),
    };
    drop(frame);
    write_answer(&mut caller, memory, &answer, out_ptr, out_len)
}

/// Copies `answer` into guest memory from the runner's `host_alloc`.
fn write_answer(
    caller: &mut Caller<'_, DataHost>,
    memory: wasmtime::Memory,
    answer: &[u8],
    out_ptr: i32,
    out_len: i32,
) -> wasmtime::Result<i32> {
    let Some(alloc) = caller
        .get_export("host_alloc")
        .and_then(Extern::into_func)
        .and_then(|f| f.typed::<i32, i32>(&*caller).ok())
    else {
        return Ok(DOOR_FAULT);
    };
    let Ok(n) = i32::try_from(answer.len()) else {
        return Ok(DOOR_FAULT);
    };
    let at = alloc.call(&mut *caller, n)? as u32 as usize;
    if at == 0 || memory.write(&mut *caller, at, answer).is_err() {
        return Ok(DOOR_FAULT);
    }
    let ok = memory
        .write(
            &mut *caller,
            out_ptr as u32 as usize,
            &(at as u32).to_le_bytes(),
        )
        .and_then(|()| {
            memory.write(
                &mut *caller,
                out_len as u32 as usize,
                &(answer.len() as u32).to_le_bytes(),
            )
        });
    Ok(if ok.is_ok() { DOOR_OK } else { DOOR_FAULT })
}

/// Most images one turn hands over (the runner keeps the same count).
pub const MAX_IMAGES: usize = 16;
/// Most base64 bytes of images one turn hands over: the runner's 8 MiB of PNG, encoded.
pub const MAX_IMAGE_TEXT: usize = 12 << 20;

/// A turn's end, as the runner reported it.
pub struct End {
    /// The head's JSON text.
    pub head: String,
    /// The result's JSON text, or an [`oversize_marker`].
    pub body: Option<String>,
    /// The figures the turn showed, base64 PNG, in order.
    pub images: code_runner_core::TurnImages,
}

/// An end frame: the head, a newline, then sections: `\x01` and the result
/// text, `\x02` and one base64 PNG (each), `\x03` and how many images the
/// runner omitted. JSON text and base64 hold none of these bytes.
fn end_frame(bytes: &[u8], max_result: usize) -> Result<End, String> {
    let split = bytes
        .iter()
        .position(|b| *b == b'\n')
        .ok_or("the turn's end has no head")?;
    if split > protocol::MAX_HEAD {
        return Err(format!("the turn's head is {split} bytes"));
    }
    let (head, rest) = bytes.split_at(split);
    let head = String::from_utf8(head.to_vec()).map_err(|_| "the turn's head is not UTF-8")?;
    let mut end = End {
        head,
        body: None,
        images: code_runner_core::TurnImages::default(),
    };
    let mut image_bytes = 0usize;
    let mut rest = &rest[1..];
    while let Some((&tag, tail)) = rest.split_first() {
        let len = tail
            .iter()
            .position(|b| matches!(b, 1..=3))
            .unwrap_or(tail.len());
        let (section, next) = tail.split_at(len);
        rest = next;
        match (section, tag) {
            (text, 1) if end.body.is_none() => {
                // Over the cap: the caller reports its size, never parses it.
                end.body = Some(if text.len() > max_result {
                    oversize_marker(text.len())
                } else {
                    String::from_utf8(text.to_vec()).map_err(|_| "the result is not UTF-8")?
                });
            }
            (data, 2) => {
                let base64 = data
                    .iter()
                    .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'/' | b'='));
                image_bytes = image_bytes.saturating_add(data.len());
                if !base64 || data.is_empty() {
                    return Err("an image of the turn is not base64".into());
                }
                if end.images.images.len() >= MAX_IMAGES || image_bytes > MAX_IMAGE_TEXT {
                    end.images.omitted = end.images.omitted.saturating_add(1);
                    continue;
                }
                end.images.images.push(code_runner_core::Image {
                    mime_type: "image/png".into(),
                    data: String::from_utf8_lossy(data).into_owned(),
                });
            }
            (count, 3) => {
                let n: usize = std::str::from_utf8(count)
                    .ok()
                    .and_then(|n| n.parse().ok())
                    .ok_or("the turn's omitted-image count is malformed")?;
                end.images.omitted = end.images.omitted.saturating_add(n);
            }
            _ => return Err("the turn's end is malformed".into()),
        }
    }
    Ok(end)
}

/// A result text the runner sent past the cap: kept as its length only.
fn oversize_marker(len: usize) -> String {
    format!("\u{0}oversize:{len}")
}

/// Parses an [`oversize_marker`], if `text` is one.
pub fn oversize_len(text: &str) -> Option<usize> {
    text.strip_prefix("\u{0}oversize:")?.parse().ok()
}

fn binding_call(caller: &mut Caller<'_, DataHost>, frame: &str) -> Result<String, Stop> {
    let host = caller.data();
    crate::control::run_binding(&host.link, host.turn.as_ref(), &host.runtime, frame, SLICE)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The sections come apart: the result, images in order, an omitted count.
    #[test]
    fn an_end_frame_comes_apart_by_sections() {
        let end = end_frame(b"{\"exit_code\":0}\n\x01[1,2]\x02iVBO\x02AAAA\x033", 100).unwrap();
        assert_eq!(end.head, "{\"exit_code\":0}");
        assert_eq!(end.body.as_deref(), Some("[1,2]"));
        let data: Vec<_> = end.images.images.iter().map(|i| i.data.as_str()).collect();
        assert_eq!(data, ["iVBO", "AAAA"]);
        assert_eq!(end.images.omitted, 3);
        let bare = end_frame(b"{}\n", 100).unwrap();
        assert!(bare.body.is_none() && bare.images.images.is_empty());
    }

    /// A result past the cap is kept as its length; it is never copied into a String.
    #[test]
    fn a_result_past_the_cap_is_its_length_only() {
        let end = end_frame(b"{}\n\x01[1,2,3]", 3).unwrap();
        assert_eq!(end.body.as_deref().and_then(oversize_len), Some(7));
    }

    /// Malformed ends are refused: no head, two results, a non-base64 image,
    /// an unknown section, a bad count.
    #[test]
    fn malformed_ends_are_refused() {
        for frame in [
            &b"{}"[..],
            b"{}\n\x01[]\x01[]",
            b"{}\n\x02not base64!",
            b"{}\nstray",
            b"{}\n\x03x",
        ] {
            assert!(end_frame(frame, 100).is_err(), "{frame:?}");
        }
    }

    /// Past the engine's ceiling images are counted, not kept.
    #[test]
    fn images_past_the_ceiling_are_counted() {
        let mut frame = b"{}\n".to_vec();
        for _ in 0..MAX_IMAGES + 2 {
            frame.extend_from_slice(b"\x02QUJD");
        }
        let end = end_frame(&frame, 100).unwrap();
        assert_eq!(
            (end.images.images.len(), end.images.omitted),
            (MAX_IMAGES, 2)
        );
    }
}
