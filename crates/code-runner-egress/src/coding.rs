//! Content coding, the worker's own: requests ask for bodies as they are
//! (`Accept-Encoding: identity`, the guest's own header dropped), and a
//! server that compresses anyway is decoded here, within the response cap,
//! before the secrets' scrub reads the body. So a secret cannot come back
//! hidden in a gzip body the guest's zlib would open. gzip and deflate
//! (zlib-wrapped, or raw as some servers send it) are decoded, with flate2;
//! any other coding is refused rather than passed on unread.

use std::io::Read;

use crate::model::Kind;

/// A content coding the worker undoes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Coding {
    /// `gzip` (or `x-gzip`).
    Gzip,
    /// `deflate`: zlib-wrapped, or raw.
    Deflate,
}

impl Coding {
    /// The coding a `Content-Encoding` token names, if it is one of ours.
    pub(crate) fn named(token: &str) -> Option<Coding> {
        match token {
            "gzip" | "x-gzip" => Some(Coding::Gzip),
            "deflate" => Some(Coding::Deflate),
            _ => None,
        }
    }
}

/// Why a body could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Undecodable {
    /// Decoded, it is larger than the cap.
    TooLarge(u64),
    /// It is not what its coding says.
    Corrupt(Coding),
}

impl Undecodable {
    pub(crate) fn kind(&self) -> Kind {
        match self {
            Undecodable::TooLarge(_) => Kind::TooLarge,
            Undecodable::Corrupt(_) => Kind::Invalid,
        }
    }
}

impl std::fmt::Display for Undecodable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Undecodable::TooLarge(cap) => write!(
                f,
                "the response, decompressed, is larger than {cap} bytes (egress_max_response_bytes)"
            ),
            Undecodable::Corrupt(coding) => write!(
                f,
                "the response says it is {coding:?}-encoded, but it does not decode; it is not passed on"
            ),
        }
    }
}

/// `body` decoded from `coding`, at most `cap` bytes of it.
pub(crate) fn decode(coding: Coding, body: &[u8], cap: u64) -> Result<Vec<u8>, Undecodable> {
    let read = |reader: &mut dyn Read| -> Result<Vec<u8>, Undecodable> {
        let mut out = Vec::new();
        reader
            .take(cap.saturating_add(1))
            .read_to_end(&mut out)
            .map_err(|_| Undecodable::Corrupt(coding))?;
        if out.len() as u64 > cap {
            return Err(Undecodable::TooLarge(cap));
        }
        Ok(out)
    };
    match coding {
        Coding::Gzip => read(&mut flate2::read::MultiGzDecoder::new(body)),
        Coding::Deflate => read(&mut flate2::read::ZlibDecoder::new(body))
            .or_else(|_| read(&mut flate2::read::DeflateDecoder::new(body))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn gzip(bytes: &[u8]) -> Vec<u8> {
        let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        encoder.write_all(bytes).unwrap();
        encoder.finish().unwrap()
    }

    /// gzip and both deflates decode; past the cap (a small bomb) and a
    /// corrupt body are refused.
    #[test]
    fn decodes_within_the_cap() {
        let text = b"hello secret".repeat(10);
        assert_eq!(decode(Coding::Gzip, &gzip(&text), 1000).unwrap(), text);
        let mut zlib = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::fast());
        zlib.write_all(&text).unwrap();
        assert_eq!(
            decode(Coding::Deflate, &zlib.finish().unwrap(), 1000).unwrap(),
            text
        );
        let mut raw = flate2::write::DeflateEncoder::new(Vec::new(), flate2::Compression::fast());
        raw.write_all(&text).unwrap();
        assert_eq!(
            decode(Coding::Deflate, &raw.finish().unwrap(), 1000).unwrap(),
            text
        );
        let bomb = gzip(&vec![0u8; 10 << 20]);
        assert!(bomb.len() < 64 << 10);
        assert_eq!(
            decode(Coding::Gzip, &bomb, 1 << 20),
            Err(Undecodable::TooLarge(1 << 20))
        );
        assert_eq!(
            decode(Coding::Gzip, b"not gzip", 1000),
            Err(Undecodable::Corrupt(Coding::Gzip))
        );
    }
}
