//! The stack swc runs on: deep enough for any nesting a source of its
//! length can have, so that the nesting guard is defence in depth and not
//! the only wall between a guest and a stack overflow (which aborts the
//! process).
//!
//! swc's parser, its visitor and the drop of its tree recurse once per level
//! of nesting, and a level costs at least one byte of source (its opening:
//! the recursion is as deep when the closers never come). Measured on
//! swc_ts_fast_strip 60 (`measure_stack_per_level`, below; stack touched,
//! parse, visit and drop together), the costliest per byte is the
//! expression parenthesis, 3,313 bytes of stack per `(`; then tuple types
//! (2,719 per `[`), arrows (2,654 per `x=>`, 885 a byte), paren types
//! (2,162), arrays (2,076), blocks (1,617), objects (5,615 per `({a:`,
//! 1,404 a byte), nested classes (8,830 per `(class{m(){return `, 490 a
//! byte); an operator chain costs 98 to 716 a level. So a source of
//! `n` bytes needs less than `n * STACK_PER_BYTE` (a margin of 2.4),
//! whatever its nesting and however the guard reads it:
//!
//! - a source of at most [`IN_PLACE_BYTES`] is stripped on the caller's
//!   thread, a runtime thread (32 MiB; this takes at most half), so a small
//!   program pays no thread hop;
//! - a longer one, up to [`POOLED_BYTES`], on one of a few long-lived strip
//!   threads whose stack is [`STRIP_STACK_BYTES`];
//! - a longer one still on a thread of its own whose stack is
//!   `n * STACK_PER_BYTE` (8 GiB for 1 MiB), given back when it ends; if the
//!   system cannot reserve that much, the source is refused, cleanly.
//!
//! Stacks are reserved, not committed: a strip touches only as deep as it
//! goes, and the guard keeps that within [`super::MAX_NESTING`] levels (at
//! most some 7 MiB). A source the guard misjudges costs stack memory, at
//! most 3.3 KiB a byte (and on a long-lived thread, whose touched pages stay,
//! at most [`POOLED_BYTES`] times that: 27 MiB), never an abort.

use std::sync::mpsc::{Receiver, Sender, sync_channel};
use std::sync::{Arc, Mutex, OnceLock};

/// Stack a source may need per byte: the most measured (3,313 bytes), times 2.4.
pub const STACK_PER_BYTE: usize = 8 << 10;
/// Longest source stripped on the caller's thread (16 MiB of stack at most,
/// 6.6 MiB as measured).
pub const IN_PLACE_BYTES: usize = 2 << 10;
/// Stack of each long-lived strip thread (reserved, not committed).
pub const STRIP_STACK_BYTES: usize = 64 << 20;
/// Longest source stripped on a long-lived strip thread.
pub const POOLED_BYTES: usize = STRIP_STACK_BYTES / STACK_PER_BYTE;
/// A runtime thread's stack holds an in-place strip twice over.
const _: () = assert!(IN_PLACE_BYTES * STACK_PER_BYTE <= crate::THREAD_STACK_BYTES / 2);
/// Long-lived strip threads at most (strips wait for one beyond that).
const MAX_STRIP_THREADS: usize = 4;

type Job = Box<dyn FnOnce() + Send>;

/// Runs `strip` on a stack that holds any nesting a source of `len` bytes
/// can have; `None` if no such stack could be had (or `strip` panicked).
pub fn run<T: Send + 'static>(len: usize, strip: impl FnOnce() -> T + Send + 'static) -> Option<T> {
    if len <= IN_PLACE_BYTES {
        return Some(strip());
    }
    let (reply, answer) = sync_channel(1);
    let job: Job = Box::new(move || {
        let _ = reply.send(strip());
    });
    if len <= POOLED_BYTES {
        pool()?.send(job).ok()?;
    } else {
        let stack = len.checked_mul(STACK_PER_BYTE)?;
        let thread = std::thread::Builder::new()
            .name("ts-strip-long".into())
            .stack_size(stack)
            .spawn(job)
            .ok()?;
        let _ = thread.join();
    }
    answer.recv().ok()
}

/// The long-lived strip threads' queue, started at the first use.
fn pool() -> Option<&'static Sender<Job>> {
    static POOL: OnceLock<Option<Sender<Job>>> = OnceLock::new();
    POOL.get_or_init(|| {
        let (sender, receiver) = std::sync::mpsc::channel::<Job>();
        let receiver = Arc::new(Mutex::new(receiver));
        let threads = std::thread::available_parallelism()
            .map_or(1, usize::from)
            .min(MAX_STRIP_THREADS);
        let mut started = 0;
        for n in 0..threads {
            let receiver = receiver.clone();
            let spawned = std::thread::Builder::new()
                .name(format!("ts-strip-{n}"))
                .stack_size(STRIP_STACK_BYTES)
                .spawn(move || serve(&receiver));
            started += usize::from(spawned.is_ok());
        }
        (started > 0).then_some(sender)
    })
    .as_ref()
}

/// One strip thread: runs jobs until the process ends; a job that panics
/// drops its reply, so its caller hears `None`, and the thread goes on.
fn serve(jobs: &Mutex<Receiver<Job>>) {
    loop {
        let job = match jobs.lock().unwrap_or_else(|p| p.into_inner()).recv() {
            Ok(job) => job,
            Err(_) => return,
        };
        let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(job));
    }
}

#[cfg(test)]
mod tests {
    use super::run;

    /// Past the guard, swc still cannot overflow its stack: nesting as deep
    /// as a source's length allows is stripped, on a pooled thread and on a
    /// thread of its own.
    #[test]
    fn any_nesting_a_source_can_have_fits_its_stack() {
        for depth in [3_000, 60_000] {
            let source = format!("x = {}1{};", "(".repeat(depth), ")".repeat(depth));
            let stripped = run(source.len(), move || crate::strip::swc(source, true, 0));
            assert!(matches!(stripped, Some(Ok(_))), "{depth}: {stripped:?}");
        }
    }

    /// Resident bytes of the memory mapping that holds `addr` (a thread's
    /// stack: its pages are resident once touched, so this is how deep the
    /// thread has gone), from `/proc/self/smaps`.
    fn resident(addr: usize) -> usize {
        let smaps = std::fs::read_to_string("/proc/self/smaps").unwrap();
        let mut inside = false;
        for line in smaps.lines() {
            if let Some((range, _)) = line.split_once(' ')
                && let Some((lo, hi)) = range.split_once('-')
                && let (Ok(lo), Ok(hi)) =
                    (usize::from_str_radix(lo, 16), usize::from_str_radix(hi, 16))
            {
                inside = lo <= addr && addr < hi;
            } else if inside && let Some(kb) = line.strip_prefix("Rss:") {
                let kb = kb.trim().trim_end_matches("kB").trim();
                return kb.parse::<usize>().unwrap() << 10;
            }
        }
        panic!("no mapping holds {addr:#x}")
    }

    /// Stack a strip of `source` touches, measured on a fresh thread.
    fn stack_of(source: String, module: bool) -> usize {
        std::thread::Builder::new()
            .stack_size(2 << 30)
            .spawn(move || {
                let here = 0u8;
                let addr = std::ptr::addr_of!(here) as usize;
                let before = resident(addr);
                let outcome = crate::strip::swc(source, module, 0);
                assert!(outcome.is_ok(), "{:?}", outcome.err());
                resident(addr) - before
            })
            .unwrap()
            .join()
            .unwrap()
    }

    /// The deepest constructs and the stack each costs per level and per
    /// byte of source (parse, visit and drop together), which
    /// [`STACK_PER_BYTE`] must be twice of:
    /// `cargo test --release --workspace --lib measure_stack -- --ignored --nocapture`.
    #[test]
    #[ignore = "a measurement, not a check"]
    #[allow(clippy::print_stderr, reason = "the measurement is its output")]
    fn measure_stack_per_level() {
        // (name, before, opening, middle, closing, after): opening and closing repeat per level.
        let constructs: &[(&str, &str, &str, &str, &str, &str)] = &[
            ("parentheses", "", "(", "1", ")", ""),
            ("arrays", "", "[", "1", "]", ""),
            ("objects", "", "({a:", "1", "})", ""),
            ("blocks", "", "{", ";", "}", ""),
            ("not", "", "!", "1", "", ""),
            ("typeof", "", "typeof ", "1", "", ""),
            ("new", "", "new ", "X", "", ""),
            ("calls", "", "f(", "1", ")", ""),
            ("arrows", "", "x=>", "1", "", ""),
            ("conditionals", "", "a?b:", "1", "", ""),
            ("assignments", "", "a=", "1", "", ""),
            ("exponents", "", "2**", "2", "", ""),
            ("sums", "", "1+", "1", "", ""),
            ("members", "", "", "a", ".b", ""),
            ("calls chained", "", "", "a", "()", ""),
            ("indexes", "", "a[", "1", "]", ""),
            ("optional calls", "", "a?.(", "1", ")", ""),
            ("negated parentheses", "", "-(", "1", ")", ""),
            ("spreads", "", "[...", "1", "]", ""),
            ("awaits", "", "await (", "1", ")", ""),
            ("classes", "", "(class{m(){return ", "1", "}})", ""),
            ("templates", "", "`${", "1", "}`", ""),
            ("functions", "", "function f(){", "", "}", ""),
            ("if-else", "", "if(a){}else ", "{}", "", ""),
            ("paren types", "let x: ", "(", "T", ")", " = 1;"),
            ("tuple types", "let x: ", "[", "T", "]", " = 1;"),
            ("type arguments", "let x: ", "A<", "T", ">", " = 1;"),
            ("union types", "let x: ", "(A|", "T", ")", " = 1;"),
            ("keyof", "let x: ", "keyof ", "T", "", " = 1;"),
            ("function types", "let x: ", "() => ", "T", "", " = 1;"),
            ("array patterns", "let ", "[", "a", "]", " = 1;"),
            ("object patterns", "let ", "{a:", "a", "}", " = 1;"),
        ];
        let (low, high) = (500, 1500);
        for (name, before, open, middle, close, after) in constructs {
            let source = |depth: usize| {
                format!(
                    "{before}{}{middle}{}{after}",
                    open.repeat(depth),
                    close.repeat(depth)
                )
            };
            let (a, b) = (source(low), source(high));
            let per_level = (stack_of(b.clone(), true) - stack_of(a.clone(), true)) / (high - low);
            // The recursion is as deep when the closers never come: a level costs its opening.
            let unit = if open.is_empty() {
                close.len()
            } else {
                open.len()
            };
            let per_byte = per_level / unit;
            eprintln!("{name:>16}: {per_level:>5} bytes a level, {per_byte:>5} a byte of source");
        }
    }
}
