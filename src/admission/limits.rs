//! What the server holds at most, and for how long: bodies, bytes in flight, JSON values,
//! connections, HTTP/2 windows, timeouts. The defaults are sized together against deploy/'s
//! memory limit; the arithmetic is in each comment.

use std::time::Duration;

/// 16 MiB: the largest AdmissionReview the apiserver can send, rounded up. The apiserver
/// takes request bodies of up to 3 MiB (`MaxRequestBodyBytes`), so a submitted object has
/// at most ~3 MiB of JSON; what it sends the webhook adds `managedFields`, which for a large
/// object (one entry per list item: 20,000 env entries) is about as large as the object
/// again: 6 MiB. An UPDATE carries `oldObject` too, up to as much (an operator may raise
/// etcd's 1.5 MiB limit): 12 MiB, plus the envelope (userInfo, options: a few KiB). The old
/// 3 MiB default refused a 1.4 MB job applied with kubectl, whose review is 4 MB
/// (last-applied-configuration and managedFields). Memory per review is measured in
/// RELIABILITY.md ("Large reviews").
pub const DEFAULT_MAX_BODY_BYTES: usize = 16 * 1024 * 1024;
/// Bytes of reviews held at once, from the first byte kept until the answer, as KiB permits
/// ([`super::budget`]). Judging a review takes about 12 times its size while it runs (a
/// 4.4 MB review without its managedFields: +53 MiB; RELIABILITY.md "Large reviews"), so
/// 8 MiB of reviews in flight is ~100 MiB at most; a review dense in JSON values takes more
/// of it (handler.rs `BUDGET_BYTES_PER_VALUE`). Reviews of the usual size (1–50 KiB) fit by
/// the hundred. A review larger than the budget takes all of it and is judged alone.
///
/// Sized with deploy/'s 256 Mi memory limit, the parts at their worst:
/// - the server, idle 37 MiB with the shipped policies, ~55 MiB under steady load, +10 MiB
///   while a policy reload compiles the next set beside the serving one;
/// - connections: 82 MiB if each of [`DEFAULT_MAX_CONNECTIONS`] holds a full HTTP/2 window
///   of data not read yet (10 MiB idle);
/// - reviews: this budget's ~100 MiB, or one review alone: a body of up to
///   [`DEFAULT_MAX_BODY_BYTES`] holding at most 524,288 values to be parsed
///   ([`PARSED_VALUES_PER_JUDGED_VALUE`], ~100 MiB) and 131,072 to be judged
///   ([`DEFAULT_MAX_REVIEW_VALUES`]: 124–140 MiB of RSS measured, idle included).
///
/// 55 + 10 + 82 + 100 = 247 MiB. Measured (RELIABILITY.md 7.5): 96 clients posting 15 MiB
/// reviews at once peak at 121–140 MiB. Raise this, `--max-body-bytes` or
/// `--max-review-values` only with the memory limit.
pub const DEFAULT_REVIEW_BYTES_IN_FLIGHT: usize = 8 * 1024 * 1024;
/// Longest a review waits for room in [`DEFAULT_REVIEW_BYTES_IN_FLIGHT`]; then it is refused
/// (429), well before the webhook's 5 s timeout.
pub const DEFAULT_REVIEW_BUDGET_WAIT: Duration = Duration::from_secs(2);
/// JSON values a review may hold to be judged (`--max-review-values`). Judging holds 1–2 KiB
/// per value (RELIABILITY.md 7.5: a 15.5 MiB review of 216,000 env entries, 650,000 values,
/// took the server to 460 MiB; an UPDATE of two such halves to 516 MiB), so the body limit
/// alone did not bound it. 131,072 judges the largest review of the tests, a 1.4 MB job of
/// 20,000 env entries as kubectl applies it, also as an UPDATE (~120,000 values; 184 MiB).
pub const DEFAULT_MAX_REVIEW_VALUES: usize = 128 * 1024;
/// JSON values a body may hold to be parsed, per value judged (`--max-review-values`):
/// parsing holds ~200 bytes per value whatever its size on the wire (a 15 MiB body of
/// `{},{},…`, 5 million values: 989 MiB), so a body is counted as it arrives
/// ([`super::tokens`]) and refused unparsed past this. 4 times: what is parsed but not judged
/// (metadata.managedFields, about as many values as the object for a long list) and the
/// counting's overcount of empty containers. 524,288 values parse in ~100 MiB.
pub const PARSED_VALUES_PER_JUDGED_VALUE: u64 = 4;
/// Webhook calls time out at 5 s (timeoutSeconds); a body slower than that is useless.
pub const BODY_READ_TIMEOUT: Duration = Duration::from_secs(5);
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(5);
/// Below the Pod's default terminationGracePeriodSeconds (30 s).
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(15);
/// An idle connection costs about 10 KiB (RELIABILITY.md: 10,000 idle TLS connections
/// added 105 MiB of RSS), and one that is sent data it has not read yet holds at most its
/// HTTP/2 connection window ([`H2_CONNECTION_WINDOW`]) and the request heads of its streams
/// ([`H2_MAX_STREAMS`] × [`H2_MAX_HEADER_LIST`]), or its HTTP/1.1 read buffer
/// ([`H1_MAX_BUF`]): 10 + 64 + 8 = 82 KiB at worst. 1,024 of them: 82 MiB at worst, 10 MiB
/// idle; 4,096 (before) could hold 4 GiB of HTTP/2 data (1 MiB windows, 200 streams). The
/// apiserver needs a few connections per replica over HTTP/2 (Go's client opens one per
/// [`H2_MAX_STREAMS`] requests in flight), one per request in flight over HTTP/1.1: 256 was
/// too few for 500 concurrent HTTP/1.1 reviews (tests/admission/load.rs), whose connections
/// were then closed under them. At the bound the least recently active one is closed, so
/// idle clients cannot lock the apiserver out.
pub const DEFAULT_MAX_CONNECTIONS: usize = 1024;
/// HTTP/2 streams per connection. Each stream is a request waiting for the memory budget
/// with its head in memory; the apiserver (Go's HTTP/2 client) opens another connection when
/// a connection's streams are all in use.
pub const H2_MAX_STREAMS: u32 = 2;
/// HTTP/2 flow-control window per stream: what a client may send on a stream that the
/// server has not read. A body waiting for the memory budget is not read, so this is what it
/// holds. Its streams' windows together fit in the connection's ([`H2_CONNECTION_WINDOW`]):
/// otherwise a stream waiting for room fills the connection's window and stalls the stream
/// that holds the room (seen: 408s after 5 s with one 64 KiB window for both). At 16 KiB a
/// 15 MiB body sent by curl took longer than the 5 s read timeout on a loaded machine; at
/// 32 KiB a 12 MiB review arrives in 0.2 s over a 0.5 ms round trip.
pub const H2_STREAM_WINDOW: u32 = 32 * 1024;
/// HTTP/2 flow-control window per connection: every stream's window at once (hyper's default
/// was 1 MiB, for each connection).
pub const H2_CONNECTION_WINDOW: u32 = H2_MAX_STREAMS * H2_STREAM_WINDOW;
/// Largest HTTP/2 request head (decoded headers). The apiserver sends a few hundred bytes.
pub const H2_MAX_HEADER_LIST: u32 = 4 * 1024;
/// Largest HTTP/1.1 read buffer (headers, and body pieces once read); hyper's default is
/// ~400 KiB per connection.
pub const H1_MAX_BUF: usize = 16 * 1024;
