//! A bounds-checked reader of the protobuf wire format.

use crate::error::ApiError;

/// Errors are boxed inside the decoder: `ApiError` is large, and the recursive decoder's stack
/// frames (one set per nested message) grow with the size of every `Result` they hold.
pub(super) type Fail = Box<ApiError>;

/// The wire type in the low three bits of a field key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Wire {
    Varint,
    Fixed64,
    Len,
    Fixed32,
}

impl Wire {
    pub(super) fn name(self) -> &'static str {
        match self {
            Self::Varint => "varint",
            Self::Fixed64 => "fixed64",
            Self::Len => "length-delimited",
            Self::Fixed32 => "fixed32",
        }
    }
}

/// Reads fields from the bytes of one message; every read checks the remaining length.
pub(super) struct Reader<'a> {
    bytes: &'a [u8],
    /// The message being read, for error messages.
    pub(super) context: &'a str,
}

impl<'a> Reader<'a> {
    pub(super) fn new(bytes: &'a [u8], context: &'a str) -> Self {
        Self { bytes, context }
    }

    pub(super) fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }

    /// A `400 Bad Request` naming the message being read.
    #[cold]
    #[inline(never)]
    pub(super) fn error(&self, what: impl std::fmt::Display) -> Fail {
        Box::new(ApiError::bad_request(format!(
            "protobuf body: {what} in {}",
            self.context
        )))
    }

    pub(super) fn varint(&mut self) -> Result<u64, Fail> {
        let mut value = 0u64;
        for (i, byte) in self.bytes.iter().enumerate().take(10) {
            let bits = u64::from(byte & 0x7f);
            if i == 9 && bits > 1 {
                return Err(self.error("a varint longer than 64 bits"));
            }
            value |= bits << (7 * i);
            if byte & 0x80 == 0 {
                self.bytes = &self.bytes[i + 1..];
                return Ok(value);
            }
        }
        Err(self.error(if self.bytes.len() >= 10 {
            "a varint longer than 10 bytes"
        } else {
            "a truncated varint"
        }))
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], Fail> {
        if self.bytes.len() < n {
            return Err(self.error(format_args!(
                "a field of {n} bytes with only {} left",
                self.bytes.len()
            )));
        }
        let (head, tail) = self.bytes.split_at(n);
        self.bytes = tail;
        Ok(head)
    }

    /// The next field's number and wire type, or `None` at the end of the message.
    pub(super) fn key(&mut self) -> Result<Option<(u32, Wire)>, Fail> {
        if self.bytes.is_empty() {
            return Ok(None);
        }
        let key = self.varint()?;
        let wire = match key & 7 {
            0 => Wire::Varint,
            1 => Wire::Fixed64,
            2 => Wire::Len,
            5 => Wire::Fixed32,
            other => return Err(self.error(format_args!("unsupported wire type {other}"))),
        };
        match u32::try_from(key >> 3) {
            Ok(number) if number > 0 => Ok(Some((number, wire))),
            _ => Err(self.error(format_args!("invalid field number {}", key >> 3))),
        }
    }

    pub(super) fn len_delimited(&mut self) -> Result<&'a [u8], Fail> {
        let length = self.varint()?;
        let length = usize::try_from(length)
            .ok()
            .filter(|&n| n <= self.bytes.len())
            .ok_or_else(|| {
                self.error(format_args!(
                    "a length of {length} bytes with only {} left",
                    self.bytes.len()
                ))
            })?;
        self.take(length)
    }

    pub(super) fn string(&mut self) -> Result<String, Fail> {
        let bytes = self.len_delimited()?;
        String::from_utf8(bytes.to_vec()).map_err(|_| self.error("a string that is not UTF-8"))
    }

    pub(super) fn fixed64(&mut self) -> Result<u64, Fail> {
        let mut word = [0u8; 8];
        word.copy_from_slice(self.take(8)?);
        Ok(u64::from_le_bytes(word))
    }

    /// Skips one value of an unknown field.
    pub(super) fn skip(&mut self, wire: Wire) -> Result<(), Fail> {
        match wire {
            Wire::Varint => self.varint().map(drop),
            Wire::Fixed64 => self.take(8).map(drop),
            Wire::Fixed32 => self.take(4).map(drop),
            Wire::Len => self.len_delimited().map(drop),
        }
    }
}
