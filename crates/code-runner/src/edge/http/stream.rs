//! `POST /v1/call/code-runner::run` with `Accept: text/event-stream`: the
//! run's output as server-sent events while the guest writes it.
//!
//! `event: stdout` / `event: stderr` with `data: {"text": "…"}` (gathered
//! for 50 ms at a time, only what enters a stream's head: the tail and the
//! truncation marker come with the answer), then exactly one
//! `event: result` (the whole `RunResponse`) or `event: error`
//! (`{"error": {code, message}}`). A client that goes away mid-stream
//! aborts the run.

use std::collections::VecDeque;
use std::convert::Infallible;

use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use code_runner_core::AbortSignal;
use futures::Stream;
use serde_json::{Value, json};
use tokio::task::JoinHandle;

use crate::bus::{CallError, Caller};
use crate::edge::api::Api;
use crate::edge::live::{Chunks, stream_name, tap};
use crate::telemetry::TraceParent;

/// Whether a request asked for events.
pub fn wants_events(headers: &axum::http::HeaderMap) -> bool {
    headers
        .get_all(axum::http::header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|v| {
            v.split(';')
                .next()
                .is_some_and(|t| t.trim().eq_ignore_ascii_case("text/event-stream"))
        })
}

/// The events of one call of `function_id`.
pub fn events<A: Api>(api: A, function_id: String, payload: Value, trace: TraceParent) -> Response {
    let (live, chunks) = tap();
    let cancel = AbortSignal::new();
    let call = {
        let caller = Caller::host_streaming(cancel.clone(), Some(live)).continuing(trace);
        tokio::spawn(async move { api.call_as(&function_id, payload, caller).await })
    };
    let state = Events {
        chunks,
        call: Some(call),
        queue: VecDeque::new(),
        cancel: AbortOnDrop(Some(cancel)),
    };
    Sse::new(stream(state))
        .keep_alive(KeepAlive::default())
        .into_response()
}

struct Events {
    chunks: Chunks,
    call: Option<JoinHandle<Result<Value, CallError>>>,
    queue: VecDeque<Event>,
    cancel: AbortOnDrop,
}

/// Aborts the run if the stream is dropped before its answer went out.
struct AbortOnDrop(Option<AbortSignal>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        if let Some(signal) = self.0.take() {
            signal.abort();
        }
    }
}

fn stream(state: Events) -> impl Stream<Item = Result<Event, Infallible>> {
    futures::stream::unfold(state, |mut state| async move {
        loop {
            if let Some(event) = state.queue.pop_front() {
                return Some((Ok(event), state));
            }
            let call = state.call.as_mut()?;
            let next = tokio::select! {
                pieces = state.chunks.next() => Next::Output(pieces),
                answer = call => Next::Answer(answer),
            };
            let answer = match next {
                Next::Output(Some(pieces)) => {
                    state.queue.extend(pieces.into_iter().map(output));
                    continue;
                }
                // Every writer is gone: only the answer is left.
                Next::Output(None) => state.call.as_mut()?.await,
                Next::Answer(answer) => answer,
            };
            state.finish(answer);
        }
    })
}

enum Next {
    Output(Option<Vec<(code_runner_core::caps::Stream, String)>>),
    Answer(Result<Result<Value, CallError>, tokio::task::JoinError>),
}

impl Events {
    /// The last output, then the answer; the run is over, so nothing aborts it.
    fn finish(&mut self, answer: Result<Result<Value, CallError>, tokio::task::JoinError>) {
        self.call = None;
        self.cancel.0 = None;
        self.queue
            .extend(self.chunks.drain().into_iter().map(output));
        let last = match answer {
            Ok(Ok(value)) => Event::default().event("result").data(value.to_string()),
            Ok(Err(err)) => Event::default()
                .event("error")
                .data(json!({ "error": err }).to_string()),
            Err(_) => Event::default().event("error").data(
                json!({ "error": {"code": "code-runner::engine", "message": "the call ended abnormally"} })
                    .to_string(),
            ),
        };
        self.queue.push_back(last);
    }
}

fn output((stream, text): (code_runner_core::caps::Stream, String)) -> Event {
    Event::default()
        .event(stream_name(stream))
        .data(json!({ "text": text }).to_string())
}
