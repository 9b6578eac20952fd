//! Sleeps: clock-only `poll_oneoff` subscriptions are answered by the host,
//! which wakes at the turn's deadline, abort or close, whichever is first
//! (epochs alone would miss a guest parked in this host call).

use std::time::{Duration, Instant, SystemTime};

use wasmtime::Caller;

use super::wasi::{FsHost, errno, memory, originals};
use crate::control::SLICE;

/// One clock subscription's wake-up time, or `None` for a descriptor subscription.
fn clock_wake(clock_base: Instant, sub: &[u8]) -> Option<Instant> {
    const TAG_CLOCK: u8 = 0;
    const ABSTIME: u16 = 1;
    const REALTIME: u32 = 0;
    if sub.get(8) != Some(&TAG_CLOCK) {
        return None;
    }
    let id = u32::from_le_bytes(sub.get(16..20)?.try_into().ok()?);
    let timeout = u64::from_le_bytes(sub.get(24..32)?.try_into().ok()?);
    let flags = u16::from_le_bytes(sub.get(40..42)?.try_into().ok()?);
    let now = Instant::now();
    let wait = if flags & ABSTIME == 0 {
        Duration::from_nanos(timeout)
    } else if id == REALTIME {
        let target = SystemTime::UNIX_EPOCH + Duration::from_nanos(timeout);
        target.duration_since(SystemTime::now()).unwrap_or_default()
    } else {
        (clock_base + Duration::from_nanos(timeout)).saturating_duration_since(now)
    };
    Some(now + wait.min(Duration::from_secs(365 * 24 * 3600)))
}

/// Clock-only polls (sleeps) are ours, bounded by the turn's stop
/// conditions; polls on descriptors go to wasmtime-wasi.
pub(super) fn poll_oneoff<T: FsHost>(
    mut caller: Caller<'_, T>,
    subs: i32,
    events: i32,
    count: i32,
    nevents: i32,
) -> wasmtime::Result<i32> {
    const SUB: usize = 48;
    const EVENT: usize = 32;
    const MAX_SUBS: usize = 4096;
    let Some(mem) = memory(&mut caller) else {
        return Ok(errno::FAULT);
    };
    let n = count as u32 as usize;
    if n == 0 || n > MAX_SUBS {
        return Ok(errno::INVAL);
    }
    let start = subs as u32 as usize;
    let table: Vec<u8> = match mem.data(&caller).get(start..start.saturating_add(n * SUB)) {
        Some(bytes) => bytes.to_vec(),
        None => return Ok(errno::FAULT),
    };
    let base = caller.data().clock_base();
    let wakes: Option<Vec<Instant>> = table
        .chunks_exact(SUB)
        .map(|s| clock_wake(base, s))
        .collect();
    let Some(wakes) = wakes else {
        let func = originals(&caller)?.poll_oneoff.clone();
        return func.call(&mut caller, (subs, events, count, nevents));
    };
    let (first, wake) = wakes
        .iter()
        .enumerate()
        .min_by_key(|(_, at)| **at)
        .map_or((0, Instant::now()), |(i, at)| (i, *at));
    loop {
        if caller.data_mut().stop_now().is_some() {
            return Err(wasmtime::Error::msg("code-runner stopped the guest"));
        }
        let now = Instant::now();
        if now >= wake {
            break;
        }
        std::thread::sleep((wake - now).min(SLICE));
    }
    let mut event = [0u8; EVENT];
    event[0..8].copy_from_slice(&table[first * SUB..first * SUB + 8]);
    let at = events as u32 as usize;
    if mem.write(&mut caller, at, &event).is_err() {
        return Ok(errno::FAULT);
    }
    let ok = mem.write(&mut caller, nevents as u32 as usize, &1u32.to_le_bytes());
    Ok(if ok.is_ok() { 0 } else { errno::FAULT })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A relative clock subscription wakes after its timeout; a descriptor one is not ours.
    #[test]
    fn clock_subscriptions_are_told_apart() {
        let mut sub = [0u8; 48];
        sub[8] = 0;
        sub[16..20].copy_from_slice(&1u32.to_le_bytes());
        sub[24..32].copy_from_slice(&5_000_000u64.to_le_bytes());
        let wake = clock_wake(Instant::now(), &sub).expect("a clock");
        assert!(wake > Instant::now());
        sub[8] = 1;
        assert!(clock_wake(Instant::now(), &sub).is_none());
    }
}
