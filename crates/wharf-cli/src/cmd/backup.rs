//! `wharf backup`, `wharf restore`: every wharf table at one snapshot, with PostgreSQL's own
//! `pg_dump`/`pg_restore` from the installation the embedded launcher uses, and the server's
//! own keys beside them, encrypted.
//!
//! Owns: the two commands, the passphrase options, where restored keys go and when a restore
//! refuses. The file's layout and sealing are [`container`]'s; where the configuration reads
//! each key is [`compose::key_place`]'s.
//!
//! `pg_dump` reads the whole dump inside one repeatable-read transaction, so identities,
//! payloads, cursors, audit and actions are always mutually consistent in a backup. Only the
//! `wharf` schema is dumped: an application sharing the database keeps its own backups.
//!
//! The keys are the server key (it seals the tenants' signing keys: a database restored
//! without it has keys nothing can open) and the webhook key, as this configuration resolves
//! them: `[outbound] server_key` / `[webhook] signing_key`, else `<data-dir>/server.key` /
//! `webhook.key`. They are sealed with a passphrase from `--passphrase-file`, else
//! `WHARF_BACKUP_PASSPHRASE`; never from a command-line value, which `ps` and the shell's
//! history would show. Without a passphrase, a backup refuses, unless `--without-keys` says
//! the operator keeps the keys some other way (the backup then says where they are).
//!
//! A restore changes nothing until everything that can refuse has been checked: the
//! passphrase opens the keys, the dump is the one recorded, every key can go where this
//! configuration reads it (a different key already there is refused without `--replace`; an
//! inline key that differs is refused always), no wharf server or worker uses the target
//! database, and the schema is absent or `--replace` was given. Only then is the schema
//! replaced, and the keys are renamed into place once the dump is in. A restore ends with
//! `wharf verify`'s checks, and fails loudly when they do not hold.
//!
//! Left out on purpose: stopping the servers it finds (an operator's supervisor would only
//! start them again; stopping is theirs to do), and closing the window between that check
//! and the schema's replacement (a server started in that second is not seen).

mod container;

use std::io::{Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, bail};

use self::container::{ContainerError, Dump, Format, Keys, Passphrase};
use crate::compose::{self, KeyPlace, OwnKey};
use crate::config::Config;
use crate::db::{APPLICATIONS_RUNNING, Database, Open};

/// The environment variable a passphrase is read from when `--passphrase-file` is not given.
pub const PASSPHRASE_ENV: &str = "WHARF_BACKUP_PASSPHRASE";

/// The mode of the directories a dump is staged in: the owner's only.
const PRIVATE_DIR_MODE: u32 = 0o700;

/// Bytes copied at a time between the dump and the backup file.
const COPY_BUFFER_BYTES: usize = 64 * 1024;

/// Where the passphrase comes from, for both commands.
#[derive(Debug, clap::Args)]
pub struct PassphraseArgs {
    /// A file holding the passphrase that encrypts the keys in the backup (one trailing
    /// newline is dropped). Without it, the environment variable WHARF_BACKUP_PASSPHRASE is
    /// read. There is no option taking the passphrase itself: `ps` would show it.
    #[arg(long, value_name = "PATH")]
    passphrase_file: Option<PathBuf>,
}

/// `wharf backup` options.
#[derive(Debug, clap::Args)]
pub struct BackupArgs {
    /// The file to write: wharf's header, the keys encrypted, then the database dump
    /// (PostgreSQL custom format).
    #[arg(long, short, value_name = "FILE")]
    out: PathBuf,
    #[command(flatten)]
    passphrase: PassphraseArgs,
    /// Write the database only, with no keys; prints where the keys are so you copy them
    /// yourself. Without this, a backup needs a passphrase.
    #[arg(long, conflicts_with = "passphrase_file")]
    without_keys: bool,
}

/// `wharf restore` options.
#[derive(Debug, clap::Args)]
pub struct RestoreArgs {
    /// A file written by `wharf backup` (or a plain pg_dump custom-format file of an older one).
    #[arg(value_name = "FILE")]
    file: PathBuf,
    /// Replace an existing wharf schema in the target database (its data is lost), and key
    /// files under the data dir that hold other keys than the backup's.
    #[arg(long)]
    replace: bool,
    #[command(flatten)]
    passphrase: PassphraseArgs,
    /// Restore the database only and leave the keys where they are (no passphrase needed).
    #[arg(long, conflicts_with = "passphrase_file")]
    without_keys: bool,
}

/// Why a backup or restore refuses to go on. Nothing was changed when one is returned; none
/// passes by itself: the operator has to do what it says.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Refusal {
    /// A backup without a passphrase, and without `--without-keys`.
    #[error(
        "no passphrase: the backup would carry the server key and the webhook key, and they \
         are only ever written encrypted; give a passphrase with --passphrase-file PATH or \
         {PASSPHRASE_ENV}, or pass --without-keys to back up the database alone and copy the \
         keys yourself"
    )]
    NoPassphrase,
    /// A restore of a backup with keys, without a passphrase or `--without-keys`.
    #[error(
        "no passphrase: this backup's keys are encrypted; give the passphrase it was written \
         with (--passphrase-file PATH or {PASSPHRASE_ENV}), or pass --without-keys to restore \
         the database alone"
    )]
    NoPassphraseToOpen,
    /// A key of the backup cannot go where this configuration reads it.
    #[error("the backup's keys do not fit this configuration; nothing was changed:\n{}", .0.join("\n"))]
    KeysConflict(Vec<String>),
    /// Wharf servers or workers use the target database.
    #[error(
        "wharf processes use the target database; stop them first (a restore would replace \
         the schema under them); nothing was changed. Their connections:\n{}",
        .0.iter().map(|p| format!("  {p}")).collect::<Vec<_>>().join("\n")
    )]
    InUse(Vec<String>),
    /// The target has a wharf schema and `--replace` was not given.
    #[error(
        "the target database already has a wharf schema; pass --replace to overwrite it \
         (nothing was changed)"
    )]
    SchemaExists,
}

/// `wharf backup`.
pub async fn backup(config: &Config, args: BackupArgs) -> anyhow::Result<()> {
    let passphrase = if args.without_keys {
        None
    } else {
        Some(read_passphrase(&args.passphrase)?.ok_or(Refusal::NoPassphrase)?)
    };
    let sources = key_sources(config)?;
    let parent = match args.out.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    // Beside the output, so the finished file is renamed into place (a backup is never seen
    // half-written) and the dump, which holds payloads, never leaves a private directory.
    let staging = private_dir()
        .prefix(".wharf-backup-")
        .tempdir_in(&parent)
        .with_context(|| format!("cannot make a temporary directory in {}", parent.display()))?;
    let dump_path = staging.path().join("dump");

    let db = Database::open(
        config,
        Open {
            migrate: false,
            connections_max: 1,
            wait: crate::db::Wait::ONCE,
        },
    )
    .await?;
    let spinner = super::progress::spinner("writing the backup");
    let mut cmd = Command::new(program("pg_dump")?);
    cmd.args([
        "--format=custom",
        "--schema=wharf",
        "--no-owner",
        "--no-privileges",
    ])
    .arg("--file")
    .arg(&dump_path)
    .arg("--dbname")
    .arg(&db.url);
    let result = run(cmd, "pg_dump");
    spinner.finish_and_clear();
    db.close().await?;
    result?;

    let dump = digest(&dump_path)?;
    let mut keys = Keys::default();
    for (key, source) in &sources {
        if let Some(bytes) = source.bytes() {
            keys.set(*key, *bytes);
        }
    }
    let prelude = match &passphrase {
        Some(passphrase) => {
            let seal = container::Seal::random()
                .map_err(|_| anyhow::anyhow!("the system's random generator failed"))?;
            container::prelude(Some((&keys, passphrase, &seal)), dump)
        }
        None => container::prelude(None, dump),
    };
    let written = staging.path().join("backup");
    write_backup(&written, &prelude, &dump_path)?;
    std::fs::rename(&written, &args.out)
        .with_context(|| format!("cannot move the backup to {}", args.out.display()))?;
    sync_dir(&parent)?;
    println!("backup written to {}", args.out.display());
    if passphrase.is_some() {
        for (key, source) in &sources {
            match source.bytes() {
                Some(_) => println!(
                    "  {} (from {}): encrypted in the backup",
                    key.file(),
                    source
                ),
                None => println!("  {}: none yet ({}), nothing to keep", key.file(), source),
            }
        }
    } else {
        println!(
            "the keys are NOT in this backup (--without-keys); copy them yourself and keep them \
             apart from it, or the restored server cannot sign:"
        );
        for (key, source) in &sources {
            match source.bytes() {
                Some(_) => println!("  {}: {}", key.file(), source),
                None => println!("  {}: none yet ({})", key.file(), source),
            }
        }
    }
    Ok(())
}

/// `wharf restore`.
pub async fn restore(config: &Config, args: RestoreArgs) -> anyhow::Result<()> {
    let meta = std::fs::metadata(&args.file)
        .with_context(|| format!("cannot read {}", args.file.display()))?;
    if !meta.is_file() {
        bail!("{} is not a file", args.file.display());
    }
    let mut file = std::fs::File::open(&args.file)
        .with_context(|| format!("cannot read {}", args.file.display()))?;
    let mut start = vec![0u8; container::HEADER_BYTES];
    let read = read_up_to(&mut file, &mut start)
        .with_context(|| format!("cannot read {}", args.file.display()))?;
    start.truncate(read);
    let staging = private_dir()
        .prefix("wharf-restore-")
        .tempdir()
        .context("cannot make a temporary directory")?;
    let (dump_path, keys) = match container::sniff(&start)? {
        Format::PgDump => {
            eprintln!(
                "warning: {} is a plain pg_dump file (a backup by an older wharf): it carries no \
                 keys; the server key and the webhook key must come from the old server's data \
                 dir ({} and {}), or its signing keys cannot be opened",
                args.file.display(),
                OwnKey::Server.file(),
                OwnKey::Webhook.file()
            );
            (args.file.clone(), None)
        }
        Format::Container => {
            let header = container::parse_header(&start)?;
            let mut section = vec![0u8; header.keys_section_bytes()];
            file.read_exact(&mut section).map_err(|e| match e.kind() {
                std::io::ErrorKind::UnexpectedEof => {
                    anyhow::Error::new(ContainerError::Truncated("keys section"))
                }
                _ => anyhow::Error::new(e).context(format!("cannot read {}", args.file.display())),
            })?;
            let keys = match header.keys {
                None => {
                    eprintln!(
                        "warning: this backup was written with --without-keys: it carries no \
                         keys; copy server.key and webhook.key from where the backup said"
                    );
                    None
                }
                Some(_) if args.without_keys => {
                    println!("--without-keys: the keys in the backup are left out");
                    None
                }
                Some(_) => {
                    let passphrase =
                        read_passphrase(&args.passphrase)?.ok_or(Refusal::NoPassphraseToOpen)?;
                    Some(container::open_keys(&header, &section, &passphrase)?)
                }
            };
            let dump_path = staging.path().join("dump");
            let found = extract(&mut file, &dump_path)?;
            container::check_dump(&header, found)?;
            (dump_path, keys)
        }
    };
    let steps = match &keys {
        Some(keys) => plan_keys(config, keys, args.replace)?,
        None => Vec::new(),
    };

    let db = Database::open_as_is(config, Open::ADMIN).await?;
    let restored = replace_schema(&db, config, &steps, &dump_path, args.replace).await;
    db.close().await?;
    let report = restored?;
    super::verify::print(&report, false);
    for step in &steps {
        println!("  {step}");
    }
    if !report.ok() {
        bail!(
            "the restored database breaks {} invariant(s)",
            report.violations()
        );
    }
    println!("restored from {}", args.file.display());
    Ok(())
}

/// The part of a restore that touches the target: the last checks (no wharf process on it,
/// the schema absent or `replace`), then the keys staged, the schema replaced, the keys put in
/// place and the invariants checked.
async fn replace_schema(
    db: &Database,
    config: &Config,
    steps: &[Step],
    dump_path: &Path,
    replace: bool,
) -> anyhow::Result<wharf::verify::Report> {
    let running = wharf_processes(&db.pool).await?;
    if !running.is_empty() {
        return Err(Refusal::InUse(running).into());
    }
    let exists = wharf::verify::schema_exists(&db.pool).await?;
    if exists && !replace {
        return Err(Refusal::SchemaExists.into());
    }
    let staged = Staged::write(config, steps)?;
    if exists {
        wharf::verify::drop_schema(&db.pool).await?;
    }
    let spinner = super::progress::spinner("restoring");
    let mut cmd = Command::new(program("pg_restore")?);
    // One transaction: a restore that fails half-way leaves nothing behind.
    cmd.args([
        "--no-owner",
        "--no-privileges",
        "--single-transaction",
        "--exit-on-error",
    ])
    .arg("--dbname")
    .arg(&db.url)
    .arg(dump_path);
    let restored = run(cmd, "pg_restore");
    spinner.finish_and_clear();
    restored?;
    staged
        .commit()
        .context("the database is restored, but its keys could not be put in place")?;
    Ok(wharf::verify::run(&db.pool).await?)
}

/// Where a key comes from in this configuration, and its bytes when it exists.
enum Source {
    /// Given inline by this configuration key.
    Inline(&'static str, [u8; 32]),
    File(PathBuf, Option<[u8; 32]>),
}

impl Source {
    fn bytes(&self) -> Option<&[u8; 32]> {
        match self {
            Source::Inline(_, bytes) => Some(bytes),
            Source::File(_, bytes) => bytes.as_ref(),
        }
    }
}

/// Names the place, never the key.
impl std::fmt::Display for Source {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Source::Inline(setting, _) => write!(f, "{setting} in the configuration"),
            Source::File(path, _) => write!(f, "{}", absolute(path).display()),
        }
    }
}

/// Every key as this configuration reads it, without making one that does not exist (a
/// backup changes nothing).
fn key_sources(config: &Config) -> anyhow::Result<Vec<(OwnKey, Source)>> {
    OwnKey::ALL
        .into_iter()
        .map(|key| {
            let source = match compose::key_place(config, key)? {
                KeyPlace::Inline(bytes) => Source::Inline(key.setting(), bytes),
                KeyPlace::File(path) => {
                    let bytes = compose::read_key_file(&path)?;
                    Source::File(path, bytes)
                }
            };
            Ok((key, source))
        })
        .collect()
}

/// What is at a key's place before a restore.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Found {
    /// The configuration gives this key inline.
    Inline([u8; 32]),
    /// No file.
    Absent,
    /// A file holding this key.
    File([u8; 32]),
    /// A file that holds no key (why).
    Unreadable(String),
}

/// What a restore does with one key of the backup.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Step {
    /// Nothing: the place already holds the backup's key.
    Keep { key: OwnKey, place: String },
    /// Write the file (over another key when `replacing`).
    Write {
        key: OwnKey,
        path: PathBuf,
        bytes: [u8; 32],
        replacing: bool,
    },
}

impl std::fmt::Display for Step {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Step::Keep { key, place } => {
                write!(f, "{}: already the backup's ({place})", key.file())
            }
            Step::Write {
                key,
                path,
                replacing,
                ..
            } => {
                let how = if *replacing { "replaced" } else { "written" };
                write!(f, "{}: {how} at {}", key.file(), absolute(path).display())
            }
        }
    }
}

/// The one rule of where a restored key goes: the place this configuration reads it from;
/// an inline key must already be the backup's; a file is written when absent, kept when it
/// holds the backup's key, and replaced only with `--replace`. An `Err` says why not.
fn decide(
    key: OwnKey,
    backup: &[u8; 32],
    path: &Path,
    found: Found,
    replace: bool,
) -> Result<Step, String> {
    let write = |replacing| Step::Write {
        key,
        path: path.to_path_buf(),
        bytes: *backup,
        replacing,
    };
    match found {
        Found::Inline(bytes) if bytes == *backup => Ok(Step::Keep {
            key,
            place: key.setting().to_owned(),
        }),
        Found::Inline(_) => Err(format!(
            "  {}: the configuration gives {} inline, and it is not the backup's; set it to the \
             backup's key (or remove it to have the key file written), then restore again",
            key.file(),
            key.setting()
        )),
        Found::Absent => Ok(write(false)),
        Found::File(bytes) if bytes == *backup => Ok(Step::Keep {
            key,
            place: absolute(path).display().to_string(),
        }),
        Found::File(_) | Found::Unreadable(_) if replace => Ok(write(true)),
        Found::File(_) => Err(format!(
            "  {}: {} holds another key; pass --replace to overwrite it with the backup's",
            key.file(),
            absolute(path).display()
        )),
        Found::Unreadable(why) => Err(format!(
            "  {}: {} exists but holds no key ({why}); pass --replace to overwrite it",
            key.file(),
            absolute(path).display()
        )),
    }
}

/// Every step of putting the backup's keys in place, or every reason they do not fit.
fn plan_keys(config: &Config, keys: &Keys, replace: bool) -> anyhow::Result<Vec<Step>> {
    let mut steps = Vec::new();
    let mut conflicts = Vec::new();
    for key in OwnKey::ALL {
        let Some(backup) = keys.get(key) else {
            continue;
        };
        let path = config.data_dir.join(key.file());
        let found = match compose::key_place(config, key)? {
            KeyPlace::Inline(bytes) => Found::Inline(bytes),
            KeyPlace::File(_) => match compose::read_key_file(&path) {
                Ok(None) => Found::Absent,
                Ok(Some(bytes)) => Found::File(bytes),
                Err(e) => Found::Unreadable(crate::report::chain(&e)),
            },
        };
        match decide(key, backup, &path, found, replace) {
            Ok(step) => steps.push(step),
            Err(conflict) => conflicts.push(conflict),
        }
    }
    if !conflicts.is_empty() {
        return Err(Refusal::KeysConflict(conflicts).into());
    }
    Ok(steps)
}

/// Key files written beside their place and not yet renamed into it; removed when dropped
/// uncommitted, so a restore that fails leaves no trace of them.
struct Staged {
    files: Vec<(PathBuf, PathBuf)>,
}

impl Staged {
    /// Writes (mode 0600, synced) every file `steps` writes, under a temporary name.
    fn write(config: &Config, steps: &[Step]) -> anyhow::Result<Staged> {
        let mut staged = Staged { files: Vec::new() };
        for step in steps {
            let Step::Write {
                key, path, bytes, ..
            } = step
            else {
                continue;
            };
            std::fs::create_dir_all(&config.data_dir)
                .with_context(|| format!("cannot create {}", config.data_dir.display()))?;
            let temp =
                config
                    .data_dir
                    .join(format!(".{}.restore-{}", key.file(), std::process::id()));
            // A leftover of a restore that was killed here has the same name: ours to remove.
            let _ = std::fs::remove_file(&temp);
            let mut out = std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(&temp)
                .with_context(|| format!("cannot create {}", temp.display()))?;
            staged.files.push((temp.clone(), path.clone()));
            out.write_all(compose::key_file_text(bytes).as_bytes())
                .and_then(|()| out.sync_all())
                .with_context(|| format!("cannot write {}", temp.display()))?;
        }
        Ok(staged)
    }

    /// Renames every file into place (atomically replacing what was there).
    fn commit(mut self) -> anyhow::Result<()> {
        let files = std::mem::take(&mut self.files);
        for (i, (temp, path)) in files.iter().enumerate() {
            if let Err(e) = std::fs::rename(temp, path) {
                for (temp, _) in &files[i..] {
                    let _ = std::fs::remove_file(temp);
                }
                return Err(e).with_context(|| format!("cannot write {}", path.display()));
            }
        }
        if let Some((_, path)) = files.first()
            && let Some(dir) = path.parent()
        {
            sync_dir(dir)?;
        }
        Ok(())
    }
}

impl Drop for Staged {
    fn drop(&mut self) {
        for (temp, _) in &self.files {
            let _ = std::fs::remove_file(temp);
        }
    }
}

/// The wharf servers and workers connected to the pool's database, one line each; this
/// process's own connections are not among them (they are named `wharf restore`).
async fn wharf_processes(pool: &sqlx::PgPool) -> anyhow::Result<Vec<String>> {
    let names: Vec<String> = APPLICATIONS_RUNNING.iter().map(|s| s.to_string()).collect();
    // An admin command's ad-hoc read of PostgreSQL's own view; no wharf table is involved.
    // `client_addr` is null for a Unix socket, and for another role's session without
    // pg_read_all_stats.
    let rows: Vec<(i32, String, Option<String>)> = sqlx::query_as(
        "SELECT pid, application_name, host(client_addr)
           FROM pg_stat_activity
          WHERE datname = current_database()
            AND pid <> pg_backend_pid()
            AND application_name = ANY($1)
          ORDER BY pid",
    )
    .bind(names)
    .fetch_all(pool)
    .await
    .context("cannot list the target database's connections (pg_stat_activity)")?;
    Ok(rows
        .into_iter()
        .map(|(pid, application, client)| {
            let client = client.unwrap_or_else(|| "a local socket".to_owned());
            format!("backend pid {pid}: {application:?} from {client}")
        })
        .collect())
}

/// The passphrase from `--passphrase-file`, else [`PASSPHRASE_ENV`]; none when neither is
/// given.
fn read_passphrase(args: &PassphraseArgs) -> anyhow::Result<Option<Passphrase>> {
    let (bytes, from) = match &args.passphrase_file {
        Some(path) => {
            let from = format!("the passphrase file {}", path.display());
            let meta = std::fs::metadata(path).with_context(|| format!("cannot read {from}"))?;
            // Room for the passphrase and its line ending.
            if meta.len() > container::PASSPHRASE_BYTES_MAX as u64 + 2 {
                bail!(
                    "{from} has {} bytes; a passphrase has at most {}",
                    meta.len(),
                    container::PASSPHRASE_BYTES_MAX
                );
            }
            let mut bytes = std::fs::read(path).with_context(|| format!("cannot read {from}"))?;
            if bytes.last() == Some(&b'\n') {
                bytes.pop();
                if bytes.last() == Some(&b'\r') {
                    bytes.pop();
                }
            }
            (bytes, from)
        }
        None => match std::env::var_os(PASSPHRASE_ENV) {
            Some(value) => {
                use std::os::unix::ffi::OsStringExt as _;
                (value.into_vec(), PASSPHRASE_ENV.to_owned())
            }
            None => return Ok(None),
        },
    };
    let passphrase = Passphrase::new(bytes).with_context(|| format!("{from} is refused"))?;
    Ok(Some(passphrase))
}

/// The length and SHA-256 of a file.
fn digest(path: &Path) -> anyhow::Result<Dump> {
    let mut file =
        std::fs::File::open(path).with_context(|| format!("cannot read {}", path.display()))?;
    copy_digest(&mut file, &mut std::io::sink())
        .with_context(|| format!("cannot read {}", path.display()))
}

/// Copies `from` to its end into `to`, returning the length and SHA-256 of what was copied.
fn copy_digest(from: &mut impl Read, to: &mut impl Write) -> std::io::Result<Dump> {
    let mut context = ring::digest::Context::new(&ring::digest::SHA256);
    let mut buffer = vec![0u8; COPY_BUFFER_BYTES];
    let mut bytes: u64 = 0;
    loop {
        let n = match from.read(&mut buffer) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        context.update(&buffer[..n]);
        to.write_all(&buffer[..n])?;
        bytes += n as u64;
    }
    let sha256 = context
        .finish()
        .as_ref()
        .try_into()
        .expect("SHA-256 has 32 bytes");
    Ok(Dump { bytes, sha256 })
}

/// Writes the rest of `file` (the dump) to `path`, mode 0600.
fn extract(file: &mut std::fs::File, path: &Path) -> anyhow::Result<Dump> {
    let mut out = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .with_context(|| format!("cannot create {}", path.display()))?;
    let found = copy_digest(file, &mut out)
        .and_then(|found| out.sync_all().map(|()| found))
        .with_context(|| format!("cannot write {}", path.display()))?;
    Ok(found)
}

/// Writes the backup file: `prelude`, then the dump at `dump_path`; mode 0600 (the keys are
/// sealed, but the dump holds payloads), synced.
fn write_backup(path: &Path, prelude: &[u8], dump_path: &Path) -> anyhow::Result<()> {
    let mut out = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .with_context(|| format!("cannot create {}", path.display()))?;
    let mut dump = std::fs::File::open(dump_path)
        .with_context(|| format!("cannot read {}", dump_path.display()))?;
    out.write_all(prelude)
        .and_then(|()| copy_digest(&mut dump, &mut out).map(|_| ()))
        .and_then(|()| out.sync_all())
        .with_context(|| format!("cannot write {}", path.display()))
}

/// Reads until `buffer` is full or the file ends; returns how much was read.
fn read_up_to(file: &mut impl Read, buffer: &mut [u8]) -> std::io::Result<usize> {
    let mut filled = 0;
    while filled < buffer.len() {
        match file.read(&mut buffer[filled..]) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        }
    }
    Ok(filled)
}

/// A temporary directory only this user can enter (tempfile's default follows the umask):
/// the dump staged in it holds payloads.
fn private_dir() -> tempfile::Builder<'static, 'static> {
    use std::os::unix::fs::PermissionsExt as _;
    let mut builder = tempfile::Builder::new();
    builder.permissions(std::fs::Permissions::from_mode(PRIVATE_DIR_MODE));
    builder
}

/// Makes a rename in `dir` durable.
fn sync_dir(dir: &Path) -> anyhow::Result<()> {
    std::fs::File::open(dir)
        .and_then(|d| d.sync_all())
        .with_context(|| format!("cannot sync {}", dir.display()))
}

fn absolute(path: &Path) -> PathBuf {
    std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf())
}

fn program(name: &str) -> anyhow::Result<PathBuf> {
    let binaries = wharf_pg::Binaries::locate()?;
    Ok(binaries.bin_dir.join(name))
}

fn run(mut cmd: Command, name: &str) -> anyhow::Result<()> {
    let output = cmd
        .stdin(std::process::Stdio::null())
        .output()
        .with_context(|| format!("cannot run {name}"))?;
    if !output.status.success() {
        bail!(
            "{name} failed ({}): {}",
            output.status,
            String::from_utf8_lossy(&output.stderr).trim()
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_restored_key_goes_where_the_configuration_reads_it() {
        let path = Path::new("/data/server.key");
        let ours = [1u8; 32];
        let other = [2u8; 32];
        let key = OwnKey::Server;
        let write = |replacing| {
            Ok(Step::Write {
                key,
                path: path.to_path_buf(),
                bytes: ours,
                replacing,
            })
        };
        let keep_inline = Ok(Step::Keep {
            key,
            place: "[outbound] server_key".to_owned(),
        });
        let keep_file = Ok(Step::Keep {
            key,
            place: "/data/server.key".to_owned(),
        });
        let unreadable = || Found::Unreadable("not base64".to_owned());
        let refused = |needle: &'static str| move |r: &Result<Step, String>| matches!(r, Err(why) if why.contains(needle));
        type Check = Box<dyn Fn(&Result<Step, String>) -> bool>;
        let is = |expected: Result<Step, String>| -> Check { Box::new(move |r| *r == expected) };
        // (what is there, --replace, expected)
        let rows: Vec<(Found, bool, Check)> = vec![
            (Found::Absent, false, is(write(false))),
            (Found::Absent, true, is(write(false))),
            (Found::File(ours), false, is(keep_file.clone())),
            (Found::File(ours), true, is(keep_file)),
            (Found::File(other), false, Box::new(refused("--replace"))),
            (Found::File(other), true, is(write(true))),
            (unreadable(), false, Box::new(refused("holds no key"))),
            (unreadable(), true, is(write(true))),
            (Found::Inline(ours), false, is(keep_inline.clone())),
            (Found::Inline(ours), true, is(keep_inline)),
            // An inline key is the operator's configuration: never overruled, not even by
            // --replace.
            (Found::Inline(other), false, Box::new(refused("inline"))),
            (Found::Inline(other), true, Box::new(refused("inline"))),
        ];
        for (found, replace, expected) in rows {
            let got = decide(key, &ours, path, found.clone(), replace);
            assert!(expected(&got), "{found:?} replace={replace}: {got:?}");
        }
    }

    #[test]
    fn a_dump_is_staged_where_only_its_owner_can_read() {
        use std::os::unix::fs::PermissionsExt as _;
        let dir = private_dir().prefix("wharf-test-").tempdir().unwrap();
        let mode = std::fs::metadata(dir.path()).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, PRIVATE_DIR_MODE, "{mode:o}");
    }

    #[test]
    fn a_copy_is_measured_as_it_goes() {
        let data = vec![7u8; 3 * COPY_BUFFER_BYTES + 5];
        let mut out = Vec::new();
        let dump = copy_digest(&mut data.as_slice(), &mut out).unwrap();
        assert_eq!(out, data);
        assert_eq!(dump.bytes, data.len() as u64);
        let expected = ring::digest::digest(&ring::digest::SHA256, &data);
        assert_eq!(&dump.sha256[..], expected.as_ref());
    }
}
