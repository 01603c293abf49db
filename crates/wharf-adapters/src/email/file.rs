//! The file transport: with no relay configured, each message becomes one `.eml` file in the
//! mail directory (`<data-dir>/mail` under `wharf serve`), named by its Message-ID.
//!
//! Owns: the file name, and the atomic write (temporary file, fsync, rename, fsync of the
//! directory). Must not know: notices, SMTP, or the outbox.
//!
//! Exactly one file per delivered action holds by construction: the name comes from the
//! Message-ID, which comes from the idempotency key, and `rename` replaces atomically. A reader
//! sees no file or the whole file, never a partial one, and a second write of the same action
//! (which the at-most-once kind never attempts) would replace, not add. Temporary files start
//! with a dot and end in `.tmp`, so `*.eml` globs never match them.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use super::message::Rendered;

/// Longest file name produced, in bytes, below the usual 255-byte limit of file systems.
const FILE_NAME_BYTES_MAX: usize = 200;

/// Distinguishes the temporary files of concurrent writes in one process.
static NEXT_TEMP: AtomicU64 = AtomicU64::new(0);

/// `<id-left@id-right>` ⇒ `id-left@id-right.eml`, with anything but `[A-Za-z0-9._@-]` replaced
/// by `_`, so a Message-ID from any configured domain is a safe, portable file name (no path
/// separators, no leading dot).
pub(crate) fn file_name(message_id: &str) -> String {
    let inner = message_id.trim_start_matches('<').trim_end_matches('>');
    let mut name: String = inner
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '@' | '-') {
                c
            } else {
                '_'
            }
        })
        .collect();
    if name.starts_with('.') || name.is_empty() {
        name.insert(0, '_');
    }
    name.truncate(FILE_NAME_BYTES_MAX - ".eml".len());
    name.push_str(".eml");
    name
}

fn write_sync(dir: &Path, name: &str, bytes: &[u8]) -> std::io::Result<PathBuf> {
    std::fs::create_dir_all(dir)?;
    let target = dir.join(name);
    let temp = dir.join(format!(
        ".{name}.{}.{}.tmp",
        std::process::id(),
        NEXT_TEMP.fetch_add(1, Ordering::Relaxed)
    ));
    let written = (|| {
        let mut file = std::fs::File::create(&temp)?;
        file.write_all(bytes)?;
        file.sync_all()?;
        std::fs::rename(&temp, &target)
    })();
    if let Err(e) = written {
        let _ = std::fs::remove_file(&temp);
        return Err(e);
    }
    // The rename is durable only once the directory entry is.
    std::fs::File::open(dir)?.sync_all()?;
    Ok(target)
}

/// Writes the message atomically into `dir`; returns its path.
pub(crate) async fn write(dir: &Path, message: &Rendered) -> std::io::Result<PathBuf> {
    let dir = dir.to_path_buf();
    let name = file_name(&message.message_id);
    let bytes = message.bytes.clone();
    tokio::task::spawn_blocking(move || write_sync(&dir, &name, &bytes))
        .await
        .map_err(std::io::Error::other)?
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_names_are_safe() {
        let check = |id: &str, name: &str| assert_eq!(file_name(id), name, "{id}");
        check("<0123abcd@wharf.local>", "0123abcd@wharf.local.eml");
        check("<a/b@c>", "a_b@c.eml");
        check("<../x@y>", "_.._x@y.eml");
        check("<>", "_.eml");
        check("<a b+c@d>", "a_b_c@d.eml");
        assert!(file_name(&format!("<{}@d>", "x".repeat(500))).len() <= FILE_NAME_BYTES_MAX);
    }
}
