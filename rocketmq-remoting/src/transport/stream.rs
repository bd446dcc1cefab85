//! A connection that is plain TCP or TLS over TCP, for code that runs its own protocol over it
//! (the broker's HA port): [`MaybeTlsStream`] and its halves.

use std::io::IoSlice;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::TcpStream;

#[cfg(feature = "tls")]
type Tls = tokio_rustls::TlsStream<TcpStream>;

/// A TCP connection, plain or with TLS (see [`ServerTlsContext::accept`] and
/// [`ClientTlsContext::connect`]).
///
/// [`ServerTlsContext::accept`]: super::ServerTlsContext::accept
/// [`ClientTlsContext::connect`]: super::ClientTlsContext::connect
#[non_exhaustive]
pub enum MaybeTlsStream {
    /// Plain TCP.
    Plain(TcpStream),
    /// TLS over TCP (feature `tls`).
    #[cfg(feature = "tls")]
    Tls(Box<Tls>),
}

impl std::fmt::Debug for MaybeTlsStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MaybeTlsStream")
            .field("tls", &self.is_tls())
            .field("peer", &self.tcp().peer_addr().ok())
            .finish()
    }
}

impl MaybeTlsStream {
    /// The TCP socket under it.
    pub fn tcp(&self) -> &TcpStream {
        match self {
            MaybeTlsStream::Plain(s) => s,
            #[cfg(feature = "tls")]
            MaybeTlsStream::Tls(s) => s.get_ref().0,
        }
    }

    /// Whether the connection is TLS.
    pub fn is_tls(&self) -> bool {
        !matches!(self, MaybeTlsStream::Plain(_))
    }

    /// Splits the connection into halves that can be used by two tasks: plain TCP splits
    /// without a lock (as [`TcpStream::into_split`]), TLS shares its session under one.
    pub fn into_split(self) -> (StreamReadHalf, StreamWriteHalf) {
        match self {
            MaybeTlsStream::Plain(s) => {
                let (r, w) = s.into_split();
                (
                    StreamReadHalf(ReadInner::Plain(r)),
                    StreamWriteHalf(WriteInner::Plain(w)),
                )
            }
            #[cfg(feature = "tls")]
            MaybeTlsStream::Tls(s) => {
                let (r, w) = tokio::io::split(*s);
                (
                    StreamReadHalf(ReadInner::Tls(r)),
                    StreamWriteHalf(WriteInner::Tls(w)),
                )
            }
        }
    }
}

/// The read half of a [`MaybeTlsStream`].
#[derive(Debug)]
pub struct StreamReadHalf(ReadInner);

#[derive(Debug)]
enum ReadInner {
    Plain(OwnedReadHalf),
    #[cfg(feature = "tls")]
    Tls(tokio::io::ReadHalf<Tls>),
}

/// The write half of a [`MaybeTlsStream`]. With TLS, written bytes may stay in the session
/// until [`flush`](tokio::io::AsyncWriteExt::flush): flush after each message.
#[derive(Debug)]
pub struct StreamWriteHalf(WriteInner);

#[derive(Debug)]
enum WriteInner {
    Plain(OwnedWriteHalf),
    #[cfg(feature = "tls")]
    Tls(tokio::io::WriteHalf<Tls>),
}

impl AsyncRead for StreamReadHalf {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        match &mut self.get_mut().0 {
            ReadInner::Plain(r) => Pin::new(r).poll_read(cx, buf),
            #[cfg(feature = "tls")]
            ReadInner::Tls(r) => Pin::new(r).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for StreamWriteHalf {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        match &mut self.get_mut().0 {
            WriteInner::Plain(w) => Pin::new(w).poll_write(cx, buf),
            #[cfg(feature = "tls")]
            WriteInner::Tls(w) => Pin::new(w).poll_write(cx, buf),
        }
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        match &mut self.get_mut().0 {
            WriteInner::Plain(w) => Pin::new(w).poll_write_vectored(cx, bufs),
            #[cfg(feature = "tls")]
            WriteInner::Tls(w) => Pin::new(w).poll_write_vectored(cx, bufs),
        }
    }

    fn is_write_vectored(&self) -> bool {
        match &self.0 {
            WriteInner::Plain(w) => w.is_write_vectored(),
            #[cfg(feature = "tls")]
            WriteInner::Tls(w) => w.is_write_vectored(),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        match &mut self.get_mut().0 {
            WriteInner::Plain(w) => Pin::new(w).poll_flush(cx),
            #[cfg(feature = "tls")]
            WriteInner::Tls(w) => Pin::new(w).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        match &mut self.get_mut().0 {
            WriteInner::Plain(w) => Pin::new(w).poll_shutdown(cx),
            #[cfg(feature = "tls")]
            WriteInner::Tls(w) => Pin::new(w).poll_shutdown(cx),
        }
    }
}
