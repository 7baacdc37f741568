//! Bodies: the request body sent to a provider (buffered, so it can be sent again, or a
//! stream sent once) and the response body handed back (the provider's, or empty when the
//! layer answers a gRPC request itself).

use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::{Bytes, BytesMut};
use http::HeaderMap;
use http_body::{Body, Frame, SizeHint};
use http_body_util::BodyExt;
use http_body_util::combinators::UnsyncBoxBody;

use crate::error::BoxError;

/// The body of a request sent to one provider.
#[derive(Debug)]
pub struct RequestBody {
    kind: Kind,
}

enum Kind {
    /// A buffered body: the data (taken when sent) and the trailers (boxed: rare in
    /// requests, and the request is moved whole several times on its way to the
    /// connection, so it is kept small).
    Full(Option<Bytes>, Option<Box<HeaderMap>>),
    /// A body sent as it comes.
    Stream(UnsyncBoxBody<Bytes, BoxError>),
}

impl std::fmt::Debug for Kind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Kind::Full(data, _) => write!(f, "Full({} bytes)", data.as_ref().map_or(0, Bytes::len)),
            Kind::Stream(_) => f.write_str("Stream"),
        }
    }
}

impl RequestBody {
    /// A complete body.
    pub fn full(data: Bytes) -> Self {
        RequestBody {
            kind: Kind::Full(Some(data), None),
        }
    }
    /// An empty body.
    pub fn empty() -> Self {
        Self::full(Bytes::new())
    }
    /// A body streamed as it comes.
    pub fn stream<B>(body: B) -> Self
    where
        B: Body<Data = Bytes> + Send + 'static,
        B::Error: Into<BoxError>,
    {
        RequestBody {
            kind: Kind::Stream(body.map_err(Into::into).boxed_unsync()),
        }
    }
}

impl Body for RequestBody {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        match &mut self.kind {
            Kind::Full(data, trailers) => {
                if let Some(d) = data.take().filter(|d| !d.is_empty()) {
                    return Poll::Ready(Some(Ok(Frame::data(d))));
                }
                Poll::Ready(trailers.take().map(|t| Ok(Frame::trailers(*t))))
            }
            Kind::Stream(s) => Pin::new(s).poll_frame(cx),
        }
    }

    fn is_end_stream(&self) -> bool {
        match &self.kind {
            Kind::Full(data, trailers) => {
                data.as_ref().is_none_or(Bytes::is_empty) && trailers.is_none()
            }
            Kind::Stream(s) => s.is_end_stream(),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match &self.kind {
            Kind::Full(data, _) => {
                SizeHint::with_exact(data.as_ref().map_or(0, |d| d.len() as u64))
            }
            Kind::Stream(s) => s.size_hint(),
        }
    }
}

/// A request body read ahead: complete (sendable again), or a stream to send once.
#[derive(Debug)]
pub enum Buffered {
    /// The whole body.
    Full(Bytes, Option<Box<HeaderMap>>),
    /// Not complete without waiting, or longer than the limit: what was read, then the rest.
    Stream(RequestBody),
    /// The stream, already sent.
    Sent,
}

impl Buffered {
    /// The body for one attempt; `None` when it was already sent as a stream.
    pub fn attempt(&mut self) -> Option<RequestBody> {
        match self {
            Buffered::Full(data, trailers) => Some(RequestBody {
                kind: Kind::Full(Some(data.clone()), trailers.clone()),
            }),
            Buffered::Stream(_) => match std::mem::replace(self, Buffered::Sent) {
                Buffered::Stream(b) => Some(b),
                _ => None,
            },
            Buffered::Sent => None,
        }
    }

    /// True when the body can be sent more than once.
    pub fn is_full(&self) -> bool {
        matches!(self, Buffered::Full(..))
    }
}

/// Reads `body` while its frames are ready without waiting, up to `limit` bytes: a unary or
/// server-streaming gRPC request is complete at once and comes back [`Buffered::Full`]; a
/// body that would wait (a client stream fed by the caller) or is longer than `limit` comes
/// back as a stream of what was read followed by the rest. A stream is never waited on here,
/// so a bidirectional call that sends only after it received cannot deadlock.
pub async fn buffer<B>(body: B, limit: usize) -> Result<Buffered, BoxError>
where
    B: Body<Data = Bytes> + Send + Unpin + 'static,
    B::Error: Into<BoxError>,
{
    let mut body = body;
    let mut first: Option<Bytes> = None;
    let mut more = BytesMut::new();
    let mut len = 0usize;
    loop {
        if body.is_end_stream() {
            return Ok(Buffered::Full(join(first, more), None));
        }
        let step = std::future::poll_fn(|cx| match Pin::new(&mut body).poll_frame(cx) {
            Poll::Pending => Poll::Ready(None),
            Poll::Ready(frame) => Poll::Ready(Some(frame)),
        })
        .await;
        match step {
            None => break,
            Some(None) => return Ok(Buffered::Full(join(first, more), None)),
            Some(Some(Err(e))) => return Err(e.into()),
            Some(Some(Ok(frame))) => match frame.into_data() {
                Ok(data) => {
                    len += data.len();
                    match &first {
                        None => first = Some(data),
                        Some(_) => more.extend_from_slice(&data),
                    }
                    if len > limit {
                        break;
                    }
                }
                Err(frame) => {
                    if let Ok(trailers) = frame.into_trailers() {
                        return Ok(Buffered::Full(join(first, more), Some(Box::new(trailers))));
                    }
                }
            },
        }
    }
    let read = join(first, more);
    let rest = body.map_err(Into::into);
    let prefix = http_body_util::Full::new(read).map_err(|never| match never {});
    Ok(Buffered::Stream(RequestBody::stream(Chain {
        first: Some(prefix),
        rest,
    })))
}

fn join(first: Option<Bytes>, more: BytesMut) -> Bytes {
    match first {
        None => Bytes::new(),
        Some(f) if more.is_empty() => f,
        Some(f) => {
            let mut all = BytesMut::with_capacity(f.len() + more.len());
            all.extend_from_slice(&f);
            all.extend_from_slice(&more);
            all.freeze()
        }
    }
}

/// One body, then another.
struct Chain<A, B> {
    first: Option<A>,
    rest: B,
}

impl<A, B> Body for Chain<A, B>
where
    A: Body<Data = Bytes, Error = BoxError> + Unpin,
    B: Body<Data = Bytes, Error = BoxError> + Unpin,
{
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        if let Some(first) = &mut self.first {
            match Pin::new(first).poll_frame(cx) {
                Poll::Ready(None) => self.first = None,
                other => return other,
            }
        }
        Pin::new(&mut self.rest).poll_frame(cx)
    }
}

/// The body of a response: the provider's, empty (a trailers-only gRPC answer the layer
/// made itself), or one empty gRPC message and an OK status (the `failsafe` cluster's
/// default answer: the reply message with every field at its default).
#[derive(Debug)]
pub struct ResponseBody<B> {
    inner: Option<B>,
    /// The default message still to send: 2 the message, 1 the trailers, 0 done.
    default_message: u8,
}

impl<B> ResponseBody<B> {
    /// The provider's body.
    pub fn new(body: B) -> Self {
        ResponseBody {
            inner: Some(body),
            default_message: 0,
        }
    }
    /// No body.
    pub fn empty() -> Self {
        ResponseBody {
            inner: None,
            default_message: 0,
        }
    }
    /// One zero-length gRPC message (uncompressed), then `grpc-status: 0`.
    pub fn default_message() -> Self {
        ResponseBody {
            inner: None,
            default_message: 2,
        }
    }
}

impl<B> Body for ResponseBody<B>
where
    B: Body<Data = Bytes> + Unpin,
{
    type Data = Bytes;
    type Error = B::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, B::Error>>> {
        let this = &mut *self;
        match (&mut this.inner, this.default_message) {
            (Some(b), _) => Pin::new(b).poll_frame(cx),
            (None, 2) => {
                this.default_message = 1;
                // The gRPC frame of an empty message: not compressed, length 0.
                Poll::Ready(Some(Ok(Frame::data(Bytes::from_static(&[0; 5])))))
            }
            (None, 1) => {
                this.default_message = 0;
                let mut trailers = HeaderMap::new();
                trailers.insert("grpc-status", http::HeaderValue::from_static("0"));
                Poll::Ready(Some(Ok(Frame::trailers(trailers))))
            }
            (None, _) => Poll::Ready(None),
        }
    }

    fn is_end_stream(&self) -> bool {
        self.default_message == 0 && self.inner.as_ref().is_none_or(Body::is_end_stream)
    }

    fn size_hint(&self) -> SizeHint {
        match &self.inner {
            Some(b) => b.size_hint(),
            None if self.default_message == 2 => SizeHint::with_exact(5),
            None => SizeHint::with_exact(0),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::{Full, StreamBody};

    async fn collect(body: RequestBody) -> Bytes {
        body.collect().await.unwrap().to_bytes()
    }

    #[tokio::test]
    async fn a_complete_body_is_buffered_and_can_be_sent_twice() {
        let mut b = buffer(Full::new(Bytes::from_static(b"hello")), 1024)
            .await
            .unwrap();
        assert!(b.is_full());
        assert_eq!(collect(b.attempt().unwrap()).await, "hello");
        assert_eq!(collect(b.attempt().unwrap()).await, "hello");
    }

    #[tokio::test]
    async fn frames_ready_at_once_are_joined() {
        let frames = futures_util_iter(["ab", "cd", "ef"]);
        let mut b = buffer(frames, 1024).await.unwrap();
        assert!(b.is_full());
        assert_eq!(collect(b.attempt().unwrap()).await, "abcdef");
    }

    #[tokio::test]
    async fn a_body_that_waits_is_streamed_once_with_what_was_read_first() {
        let (tx, rx) = tokio::sync::mpsc::channel::<Result<Frame<Bytes>, BoxError>>(4);
        tx.send(Ok(Frame::data(Bytes::from_static(b"first "))))
            .await
            .unwrap();
        let body = StreamBody::new(ReceiverStream(rx));
        let mut b = buffer(body, 1024).await.unwrap();
        assert!(!b.is_full());
        let sent = b.attempt().unwrap();
        assert!(b.attempt().is_none(), "a stream is sent once");
        tx.send(Ok(Frame::data(Bytes::from_static(b"second"))))
            .await
            .unwrap();
        drop(tx);
        assert_eq!(collect(sent).await, "first second");
    }

    #[tokio::test]
    async fn a_body_over_the_limit_is_streamed() {
        let frames = futures_util_iter(["abcd", "efgh", "ij"]);
        let mut b = buffer(frames, 5).await.unwrap();
        assert!(!b.is_full());
        assert_eq!(collect(b.attempt().unwrap()).await, "abcdefghij");
    }

    /// A body of ready frames.
    fn futures_util_iter(
        parts: [&'static str; 3],
    ) -> StreamBody<IterStream<std::array::IntoIter<&'static str, 3>>> {
        StreamBody::new(IterStream(parts.into_iter()))
    }

    struct IterStream<I>(I);
    impl<I: Iterator<Item = &'static str> + Unpin> tokio_stream_like::Stream for IterStream<I> {
        type Item = Result<Frame<Bytes>, BoxError>;
        fn poll_next(mut self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<Option<Self::Item>> {
            Poll::Ready(
                self.0
                    .next()
                    .map(|s| Ok(Frame::data(Bytes::from_static(s.as_bytes())))),
            )
        }
    }

    struct ReceiverStream(tokio::sync::mpsc::Receiver<Result<Frame<Bytes>, BoxError>>);
    impl tokio_stream_like::Stream for ReceiverStream {
        type Item = Result<Frame<Bytes>, BoxError>;
        fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
            self.0.poll_recv(cx)
        }
    }

    use futures_core as tokio_stream_like;
}
