//! The backup file's format: a fixed header, the server's own keys sealed under a passphrase,
//! then PostgreSQL's custom-format dump, byte for byte.
//!
//! Owns: the layout, the key derivation and the sealing. Plain functions over bytes: no files,
//! no database, no clock; the caller passes the salt and nonce in (drawn from the system's
//! generator by [`Seal::random`]), so a test can build any file it wants. Must not know: where
//! the keys live on disk or in the configuration, or how the dump is made and restored
//! (`backup.rs` does both).
//!
//! # Layout (format version 1, integers big-endian)
//!
//! | bytes | field |
//! |---|---|
//! | 8 | [`MAGIC`] |
//! | 2 | format version ([`FORMAT_VERSION`]) |
//! | 1 | flags: bit 0 set when a keys section follows; other bits zero |
//! | 1 | zero |
//! | 4 | PBKDF2 iterations (0 without keys) |
//! | 16 | PBKDF2 salt (zeros without keys) |
//! | 12 | AEAD nonce (zeros without keys) |
//! | 4 | bytes of the keys section (0 without keys) |
//! | 8 | bytes of the dump |
//! | 32 | SHA-256 of the dump |
//! | … | keys section: ChaCha20-Poly1305 of the key list, tag included |
//! | … | the dump |
//!
//! The key list is one entry per key, a tag byte (1 the server key, 2 the webhook key) and the
//! key's 32 bytes. The sealing key is PBKDF2-HMAC-SHA256 of the passphrase with the header's
//! salt and iteration count, and the whole header is the associated data: a changed byte
//! anywhere before the dump (the dump's length and digest included) fails the open, exactly as
//! a wrong passphrase does; the two cannot be told apart, by design of an AEAD. The dump itself
//! is not encrypted (it is what `pg_dump` writes, and what an old plain backup was); its
//! digest finds a damaged or truncated copy before anything is restored. A backup written
//! without keys has the same header with the keys fields zero, and its digest is a check
//! against accidents only.

use std::num::NonZeroU32;

use ring::aead::{Aad, CHACHA20_POLY1305, LessSafeKey, NONCE_LEN, Nonce, UnboundKey};

use crate::compose::OwnKey;

/// The first bytes of every backup wharf writes. A plain `pg_dump` custom-format file starts
/// with [`PG_DUMP_MAGIC`] instead.
pub const MAGIC: [u8; 8] = *b"WHARFBK\n";
/// What `pg_dump --format=custom` files start with: the backups of wharf before keys.
pub const PG_DUMP_MAGIC: [u8; 5] = *b"PGDMP";
/// The layout this wharf writes and reads.
pub const FORMAT_VERSION: u16 = 1;
/// Bytes of the fixed header.
pub const HEADER_BYTES: usize = 88;
/// PBKDF2-HMAC-SHA256 iterations written, and the fewest accepted: OWASP's 2023 figure for
/// this function. Measured at about 0.12 s of one core per derivation (the unit tests' 11 in
/// 1.35 s on a loaded 2-core machine): paid once per backup and once per restore, and by a
/// guesser once per guess.
pub const PBKDF2_ITERATIONS_MIN: u32 = 600_000;
/// The most iterations accepted on reading: a damaged or hostile header must not make a
/// restore spin for minutes (this is about two seconds of one core at the rate above).
pub const PBKDF2_ITERATIONS_MAX: u32 = 10_000_000;
/// Bytes of the PBKDF2 salt.
pub const SALT_BYTES: usize = 16;
/// The shortest passphrase accepted: shorter ones fall to a guessing attack on a stolen file
/// however many iterations it costs.
pub const PASSPHRASE_BYTES_MIN: usize = 12;
/// The longest passphrase accepted (and so the largest passphrase file read).
pub const PASSPHRASE_BYTES_MAX: usize = 1024;
/// The largest keys section accepted on reading: room for every key a later format might
/// list; this one writes 82 bytes at most.
pub const KEYS_SECTION_BYTES_MAX: u32 = 4096;

const FLAG_KEYS: u8 = 1;
const KEY_BYTES: usize = 32;
const ENTRY_BYTES: usize = 1 + KEY_BYTES;
const TAG_BYTES: usize = 16;

/// Why a backup file cannot be read. None of these is passing: retrying the same file with
/// the same passphrase gives the same answer.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ContainerError {
    /// The file is shorter than its header or its keys section (a copy cut short).
    #[error("the backup is truncated: it ends inside its {0}")]
    Truncated(&'static str),
    /// The file starts with neither wharf's header nor a pg_dump custom-format header.
    #[error("not a wharf backup: it starts with neither wharf's header nor pg_dump's")]
    NotABackup,
    /// A later wharf wrote it, in a layout this one does not know.
    #[error(
        "the backup is in format version {found}, this wharf reads version {FORMAT_VERSION}: \
         restore it with the wharf that wrote it or a later one"
    )]
    UnsupportedVersion {
        /// The version in the file.
        found: u16,
    },
    /// A header field holds a value this format never writes (damage, or not our file).
    #[error("the backup's header is damaged: {0}")]
    Malformed(String),
    /// The passphrase does not open the keys, or a byte of the header or keys was changed
    /// since the backup was written; the two look the same.
    #[error(
        "wrong passphrase: it does not open this backup's keys (or the backup's header or \
         keys section was changed since it was written)"
    )]
    WrongPassphrase,
    /// The passphrase is shorter than [`PASSPHRASE_BYTES_MIN`] or longer than
    /// [`PASSPHRASE_BYTES_MAX`].
    #[error(
        "the passphrase has {bytes} bytes; it must have {PASSPHRASE_BYTES_MIN} to \
         {PASSPHRASE_BYTES_MAX}"
    )]
    PassphraseLength {
        /// Its length.
        bytes: usize,
    },
    /// The dump that follows the header is not the one the backup recorded.
    #[error(
        "the backup's database dump is damaged: the header records {expected_bytes} bytes \
         with SHA-256 {expected}, the file holds {found_bytes} bytes with SHA-256 {found}"
    )]
    DumpDamaged {
        /// Bytes the header records.
        expected_bytes: u64,
        /// Bytes found after the keys.
        found_bytes: u64,
        /// The recorded digest, hex.
        expected: String,
        /// The digest of what was found, hex.
        found: String,
    },
}

/// What kind of file a backup is, from its first bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// A wharf backup: header, keys, dump.
    Container,
    /// A plain `pg_dump` custom-format file (a backup of wharf before keys): no keys.
    PgDump,
}

/// Which format `start` (the file's first bytes, at least [`MAGIC`]'s length when the file
/// has them) begins.
pub fn sniff(start: &[u8]) -> Result<Format, ContainerError> {
    if start.starts_with(&MAGIC) {
        Ok(Format::Container)
    } else if start.starts_with(&PG_DUMP_MAGIC) {
        Ok(Format::PgDump)
    } else {
        Err(ContainerError::NotABackup)
    }
}

/// A passphrase, checked for length. Never printed.
pub struct Passphrase(Vec<u8>);

impl Passphrase {
    /// `bytes` as a passphrase, when its length is within bounds.
    pub fn new(bytes: Vec<u8>) -> Result<Passphrase, ContainerError> {
        if !(PASSPHRASE_BYTES_MIN..=PASSPHRASE_BYTES_MAX).contains(&bytes.len()) {
            return Err(ContainerError::PassphraseLength { bytes: bytes.len() });
        }
        Ok(Passphrase(bytes))
    }
}

impl std::fmt::Debug for Passphrase {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Passphrase(..)")
    }
}

impl Drop for Passphrase {
    fn drop(&mut self) {
        wipe(&mut self.0);
    }
}

/// The server's own keys a backup carries; a key the source did not have is absent.
#[derive(Default, PartialEq, Eq)]
pub struct Keys {
    entries: Vec<(OwnKey, [u8; KEY_BYTES])>,
}

impl Keys {
    /// Adds `key`, replacing an earlier entry for it.
    pub fn set(&mut self, key: OwnKey, bytes: [u8; KEY_BYTES]) {
        self.entries.retain(|(k, _)| *k != key);
        self.entries.push((key, bytes));
    }

    /// The bytes of `key`, when the backup has it.
    pub fn get(&self, key: OwnKey) -> Option<&[u8; KEY_BYTES]> {
        self.entries.iter().find(|(k, _)| *k == key).map(|(_, b)| b)
    }

    fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.entries.len() * ENTRY_BYTES + TAG_BYTES);
        for key in OwnKey::ALL {
            if let Some(bytes) = self.get(key) {
                out.push(tag(key));
                out.extend_from_slice(bytes);
            }
        }
        out
    }

    fn decode(plain: &[u8]) -> Result<Keys, ContainerError> {
        if !plain.len().is_multiple_of(ENTRY_BYTES) {
            return Err(ContainerError::Malformed(format!(
                "the key list has {} bytes, not a multiple of {ENTRY_BYTES}",
                plain.len()
            )));
        }
        let mut keys = Keys::default();
        for entry in plain.chunks_exact(ENTRY_BYTES) {
            let key = OwnKey::ALL
                .into_iter()
                .find(|k| tag(*k) == entry[0])
                .ok_or_else(|| {
                    ContainerError::Malformed(format!("unknown key tag {}", entry[0]))
                })?;
            if keys.get(key).is_some() {
                return Err(ContainerError::Malformed(format!(
                    "the {} is listed twice",
                    key.file()
                )));
            }
            let mut bytes = [0u8; KEY_BYTES];
            bytes.copy_from_slice(&entry[1..]);
            keys.set(key, bytes);
        }
        Ok(keys)
    }
}

impl std::fmt::Debug for Keys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<&str> = self.entries.iter().map(|(k, _)| k.file()).collect();
        f.debug_struct("Keys").field("keys", &names).finish()
    }
}

impl Drop for Keys {
    fn drop(&mut self) {
        for (_, bytes) in &mut self.entries {
            wipe(bytes);
        }
    }
}

fn tag(key: OwnKey) -> u8 {
    match key {
        OwnKey::Server => 1,
        OwnKey::Webhook => 2,
    }
}

/// The dump a header describes: its length and SHA-256.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Dump {
    /// Its length.
    pub bytes: u64,
    /// Its SHA-256.
    pub sha256: [u8; 32],
}

/// The random inputs of one sealing.
#[derive(Debug, Clone, Copy)]
pub struct Seal {
    /// The PBKDF2 salt.
    pub salt: [u8; SALT_BYTES],
    /// The AEAD nonce.
    pub nonce: [u8; NONCE_LEN],
    /// PBKDF2 iterations, at least [`PBKDF2_ITERATIONS_MIN`].
    pub iterations: u32,
}

impl Seal {
    /// A fresh salt and nonce from the system's generator, [`PBKDF2_ITERATIONS_MIN`]
    /// iterations. One passphrase-derived key seals one message, so a random nonce can never
    /// repeat under a key.
    pub fn random() -> Result<Seal, ring::error::Unspecified> {
        use ring::rand::SecureRandom as _;
        let rng = ring::rand::SystemRandom::new();
        let mut seal = Seal {
            salt: [0; SALT_BYTES],
            nonce: [0; NONCE_LEN],
            iterations: PBKDF2_ITERATIONS_MIN,
        };
        rng.fill(&mut seal.salt)?;
        rng.fill(&mut seal.nonce)?;
        Ok(seal)
    }
}

/// A parsed header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Header {
    /// The sealing inputs and the keys section's length, when the backup has keys.
    pub keys: Option<(SealParams, u32)>,
    /// The dump that follows.
    pub dump: Dump,
    raw: [u8; HEADER_BYTES],
}

/// A header's sealing fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SealParams {
    /// PBKDF2 iterations.
    pub iterations: u32,
    salt: [u8; SALT_BYTES],
    nonce: [u8; NONCE_LEN],
}

impl Header {
    /// Bytes of the keys section that follows the header.
    pub fn keys_section_bytes(&self) -> usize {
        self.keys.map_or(0, |(_, len)| len as usize)
    }
}

fn header_bytes(seal: Option<(&Seal, u32)>, dump: Dump) -> [u8; HEADER_BYTES] {
    let mut h = [0u8; HEADER_BYTES];
    h[0..8].copy_from_slice(&MAGIC);
    h[8..10].copy_from_slice(&FORMAT_VERSION.to_be_bytes());
    if let Some((seal, keys_bytes)) = seal {
        h[10] = FLAG_KEYS;
        h[12..16].copy_from_slice(&seal.iterations.to_be_bytes());
        h[16..32].copy_from_slice(&seal.salt);
        h[32..44].copy_from_slice(&seal.nonce);
        h[44..48].copy_from_slice(&keys_bytes.to_be_bytes());
    }
    h[48..56].copy_from_slice(&dump.bytes.to_be_bytes());
    h[56..88].copy_from_slice(&dump.sha256);
    h
}

/// What precedes the dump in a backup: the header, and the sealed keys when `sealed` says
/// with which passphrase and inputs; without, a header that says the backup has no keys.
pub fn prelude(sealed: Option<(&Keys, &Passphrase, &Seal)>, dump: Dump) -> Vec<u8> {
    let Some((keys, passphrase, seal)) = sealed else {
        return header_bytes(None, dump).to_vec();
    };
    let mut section = keys.encode();
    let keys_bytes = (section.len() + TAG_BYTES) as u32;
    let header = header_bytes(Some((seal, keys_bytes)), dump);
    let params = SealParams {
        iterations: seal.iterations,
        salt: seal.salt,
        nonce: seal.nonce,
    };
    aead_key(passphrase, &params)
        .seal_in_place_append_tag(
            Nonce::assume_unique_for_key(seal.nonce),
            Aad::from(&header[..]),
            &mut section,
        )
        // Sealing fails only for a message beyond ChaCha20's 256 GiB: ours is 82 bytes.
        .expect("a key list this small always seals");
    let mut out = header.to_vec();
    out.extend_from_slice(&section);
    out
}

/// The header at the start of `bytes` (at least [`HEADER_BYTES`] of them).
pub fn parse_header(bytes: &[u8]) -> Result<Header, ContainerError> {
    let h: [u8; HEADER_BYTES] = bytes
        .get(..HEADER_BYTES)
        .and_then(|b| b.try_into().ok())
        .ok_or(ContainerError::Truncated("header"))?;
    if h[0..8] != MAGIC {
        return Err(ContainerError::NotABackup);
    }
    let found = u16::from_be_bytes([h[8], h[9]]);
    if found != FORMAT_VERSION {
        return Err(ContainerError::UnsupportedVersion { found });
    }
    let flags = h[10];
    if flags & !FLAG_KEYS != 0 || h[11] != 0 {
        return Err(ContainerError::Malformed(format!(
            "unknown flags {flags:#04x}"
        )));
    }
    let u32_at = |at: usize| u32::from_be_bytes(h[at..at + 4].try_into().expect("4 bytes"));
    let iterations = u32_at(12);
    let keys_bytes = u32_at(44);
    let keys = if flags & FLAG_KEYS != 0 {
        if !(PBKDF2_ITERATIONS_MIN..=PBKDF2_ITERATIONS_MAX).contains(&iterations) {
            return Err(ContainerError::Malformed(format!(
                "{iterations} PBKDF2 iterations, outside \
                 {PBKDF2_ITERATIONS_MIN}..={PBKDF2_ITERATIONS_MAX}"
            )));
        }
        if !(TAG_BYTES as u32..=KEYS_SECTION_BYTES_MAX).contains(&keys_bytes) {
            return Err(ContainerError::Malformed(format!(
                "a keys section of {keys_bytes} bytes"
            )));
        }
        let params = SealParams {
            iterations,
            salt: h[16..32].try_into().expect("16 bytes"),
            nonce: h[32..44].try_into().expect("12 bytes"),
        };
        Some((params, keys_bytes))
    } else {
        if iterations != 0 || keys_bytes != 0 || h[16..44].iter().any(|b| *b != 0) {
            return Err(ContainerError::Malformed(
                "keys fields set in a backup without keys".to_owned(),
            ));
        }
        None
    };
    Ok(Header {
        keys,
        dump: Dump {
            bytes: u64::from_be_bytes(h[48..56].try_into().expect("8 bytes")),
            sha256: h[56..88].try_into().expect("32 bytes"),
        },
        raw: h,
    })
}

/// The keys sealed in `section` (the bytes after `header`), opened with `passphrase`. A
/// backup without keys has none to open: an empty list.
pub fn open_keys(
    header: &Header,
    section: &[u8],
    passphrase: &Passphrase,
) -> Result<Keys, ContainerError> {
    let Some((params, keys_bytes)) = header.keys else {
        return Ok(Keys::default());
    };
    if section.len() < keys_bytes as usize {
        return Err(ContainerError::Truncated("keys section"));
    }
    let mut buffer = section[..keys_bytes as usize].to_vec();
    let opened = aead_key(passphrase, &params)
        .open_in_place(
            Nonce::assume_unique_for_key(params.nonce),
            Aad::from(&header.raw[..]),
            &mut buffer,
        )
        .map_err(|_| ContainerError::WrongPassphrase);
    let keys = opened.and_then(|plain| Keys::decode(&*plain));
    wipe(&mut buffer);
    keys
}

/// Compares the dump found after the keys with the one the header records.
pub fn check_dump(header: &Header, found: Dump) -> Result<(), ContainerError> {
    if found == header.dump {
        return Ok(());
    }
    Err(ContainerError::DumpDamaged {
        expected_bytes: header.dump.bytes,
        found_bytes: found.bytes,
        expected: hex(&header.dump.sha256),
        found: hex(&found.sha256),
    })
}

fn aead_key(passphrase: &Passphrase, params: &SealParams) -> LessSafeKey {
    let mut key = [0u8; KEY_BYTES];
    let iterations = NonZeroU32::new(params.iterations).expect("iterations were checked");
    ring::pbkdf2::derive(
        ring::pbkdf2::PBKDF2_HMAC_SHA256,
        iterations,
        &params.salt,
        &passphrase.0,
        &mut key,
    );
    let unbound = UnboundKey::new(&CHACHA20_POLY1305, &key).expect("32 bytes is its key length");
    wipe(&mut key);
    LessSafeKey::new(unbound)
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn wipe(bytes: &mut [u8]) {
    for b in bytes {
        // Volatile so the compiler cannot drop the wipe of memory about to be freed.
        // SAFETY: `b` is a valid, aligned, exclusive reference to a u8.
        unsafe { std::ptr::write_volatile(b, 0) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn passphrase(text: &str) -> Passphrase {
        Passphrase::new(text.as_bytes().to_vec()).unwrap()
    }

    fn keys() -> Keys {
        let mut keys = Keys::default();
        keys.set(OwnKey::Server, [7; 32]);
        keys.set(OwnKey::Webhook, [9; 32]);
        keys
    }

    const SEAL: Seal = Seal {
        salt: [1; SALT_BYTES],
        nonce: [2; NONCE_LEN],
        iterations: PBKDF2_ITERATIONS_MIN,
    };

    const DUMP: Dump = Dump {
        bytes: 1234,
        sha256: [3; 32],
    };

    /// A sealed prelude and the header parsed back from it.
    fn sealed() -> (Vec<u8>, Header) {
        let bytes = prelude(
            Some((&keys(), &passphrase("correct horse battery"), &SEAL)),
            DUMP,
        );
        let header = parse_header(&bytes).unwrap();
        (bytes, header)
    }

    #[test]
    fn keys_round_trip_under_their_passphrase() {
        let (bytes, header) = sealed();
        assert_eq!(bytes.len(), HEADER_BYTES + 2 * ENTRY_BYTES + TAG_BYTES);
        assert_eq!(header.dump, DUMP);
        assert_eq!(header.keys_section_bytes(), 2 * ENTRY_BYTES + TAG_BYTES);
        let opened = open_keys(
            &header,
            &bytes[HEADER_BYTES..],
            &passphrase("correct horse battery"),
        )
        .unwrap();
        assert!(opened == keys());
        assert_eq!(opened.get(OwnKey::Server), Some(&[7; 32]));
        // Neither key appears in the file in clear.
        for key in [[7u8; 32], [9u8; 32]] {
            assert!(!bytes.windows(32).any(|w| w == key));
        }
    }

    #[test]
    fn a_wrong_passphrase_is_refused() {
        let (bytes, header) = sealed();
        let wrong = open_keys(
            &header,
            &bytes[HEADER_BYTES..],
            &passphrase("correct horse staple"),
        );
        assert!(
            matches!(wrong, Err(ContainerError::WrongPassphrase)),
            "{wrong:?}"
        );
    }

    #[test]
    fn a_changed_byte_of_header_or_keys_is_refused() {
        let (bytes, _) = sealed();
        // Every byte the AEAD covers, as associated data or ciphertext: the salt, the nonce,
        // the dump's length and digest, the sealed keys and their tag.
        let positions = [
            16,
            31,
            32,
            43,
            48,
            55,
            56,
            87,
            HEADER_BYTES,
            bytes.len() - 1,
        ];
        for at in positions {
            let mut tampered = bytes.clone();
            tampered[at] ^= 0x01;
            let opened = parse_header(&tampered).and_then(|header| {
                open_keys(
                    &header,
                    &tampered[HEADER_BYTES..],
                    &passphrase("correct horse battery"),
                )
            });
            assert!(
                matches!(opened, Err(ContainerError::WrongPassphrase)),
                "byte {at}: {opened:?}"
            );
        }
    }

    #[test]
    fn a_header_this_format_never_writes_is_refused() {
        let (bytes, _) = sealed();
        let check = |at: usize, value: u8, expected: &dyn Fn(&ContainerError) -> bool| {
            let mut tampered = bytes.clone();
            tampered[at] = value;
            let err = parse_header(&tampered).unwrap_err();
            assert!(expected(&err), "byte {at} = {value}: {err:?}");
        };
        check(0, b'X', &|e| matches!(e, ContainerError::NotABackup));
        check(9, 2, &|e| {
            matches!(e, ContainerError::UnsupportedVersion { found: 2 })
        });
        check(10, 0x03, &|e| matches!(e, ContainerError::Malformed(_)));
        check(11, 1, &|e| matches!(e, ContainerError::Malformed(_)));
        // Too few iterations (a weakened file), too many (a restore that spins), a keys
        // section larger than any wharf writes.
        check(13, 0, &|e| matches!(e, ContainerError::Malformed(_)));
        check(12, 0xff, &|e| matches!(e, ContainerError::Malformed(_)));
        check(46, 0xff, &|e| matches!(e, ContainerError::Malformed(_)));
        assert!(matches!(
            parse_header(&bytes[..HEADER_BYTES - 1]),
            Err(ContainerError::Truncated("header"))
        ));
        let header = parse_header(&bytes).unwrap();
        let short = open_keys(
            &header,
            &bytes[HEADER_BYTES..bytes.len() - 1],
            &passphrase("correct horse battery"),
        );
        assert!(
            matches!(short, Err(ContainerError::Truncated(_))),
            "{short:?}"
        );
    }

    #[test]
    fn a_backup_without_keys_has_only_a_header() {
        let bytes = prelude(None, DUMP);
        assert_eq!(bytes.len(), HEADER_BYTES);
        let header = parse_header(&bytes).unwrap();
        assert_eq!(header.keys, None);
        assert_eq!(header.keys_section_bytes(), 0);
        let opened = open_keys(&header, &[], &passphrase("any passphrase at all")).unwrap();
        assert!(opened == Keys::default());
        // Keys fields in a header that says there are none: damage, refused.
        let mut tampered = bytes.clone();
        tampered[20] = 1;
        assert!(matches!(
            parse_header(&tampered),
            Err(ContainerError::Malformed(_))
        ));
    }

    #[test]
    fn the_dump_must_be_the_one_recorded() {
        let (_, header) = sealed();
        assert!(check_dump(&header, DUMP).is_ok());
        let shorter = Dump {
            bytes: DUMP.bytes - 1,
            ..DUMP
        };
        let changed = Dump {
            sha256: [4; 32],
            ..DUMP
        };
        for found in [shorter, changed] {
            let err = check_dump(&header, found).unwrap_err();
            assert!(matches!(err, ContainerError::DumpDamaged { .. }), "{err:?}");
        }
    }

    #[test]
    fn formats_are_told_apart_by_their_first_bytes() {
        let (bytes, _) = sealed();
        let check = |start: &[u8], expected: Option<Format>| {
            assert_eq!(sniff(start).ok(), expected, "{start:?}");
        };
        check(&bytes, Some(Format::Container));
        check(b"PGDMP\x01\x0e\x00", Some(Format::PgDump));
        check(b"-- PostgreSQL database dump", None);
        check(b"", None);
    }

    #[test]
    fn passphrases_have_bounds() {
        let check = |bytes: usize, ok: bool| {
            assert_eq!(Passphrase::new(vec![b'a'; bytes]).is_ok(), ok, "{bytes}");
        };
        check(0, false);
        check(PASSPHRASE_BYTES_MIN - 1, false);
        check(PASSPHRASE_BYTES_MIN, true);
        check(PASSPHRASE_BYTES_MAX, true);
        check(PASSPHRASE_BYTES_MAX + 1, false);
    }
}
