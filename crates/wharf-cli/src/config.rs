//! Configuration: command-line flags, then `WHARF_*` environment variables, then a TOML file,
//! then defaults — the first that says something wins.
//!
//! The file (`--config`, `WHARF_CONFIG`, or `./wharf.toml` when it exists) has a few top-level
//! keys (`database_url`, `data_dir`, `log_format`) and one table per subsystem (`[serve]`,
//! `[executor]`, `[email]`, `[inbox]`, …). A subsystem reads its table with
//! [`Config::section`], and any key of it can be overridden by `WHARF_<TABLE>__<KEY>`, for
//! example `WHARF_EMAIL__RELAY_HOST=smtp.example.org`. This module knows no subsystem's keys.

use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use serde::de::DeserializeOwned;

/// Where wharf keeps its embedded database and files when nothing else is said.
pub const DATA_DIR_DEFAULT: &str = ".wharf";

/// Bytes a configuration file may have; a larger one is a mistake, not a configuration.
pub const CONFIG_FILE_BYTES_MAX: u64 = 1 << 20;

/// The keys the file may hold at its top level, each a string.
pub const TOP_LEVEL_KEYS: [&str; 3] = ["database_url", "data_dir", "log_format"];

/// The tables the file may hold, one per subsystem that reads one with [`Config::section`].
/// A table not listed here is refused: a typo such as `[emial]` would otherwise be ignored,
/// and wharf would quietly run with the defaults it was meant to replace (`.eml` files
/// instead of mail). A new subsystem adds its table here.
pub const TABLES: [&str; 10] = [
    "serve", "startup", "executor", "email", "http", "webhook", "envelope", "outbound", "inbox",
    "console",
];

/// Options every command takes.
#[derive(Debug, clap::Args)]
pub struct GlobalArgs {
    /// A TOML configuration file [default: ./wharf.toml when it exists].
    #[arg(long, env = "WHARF_CONFIG", global = true, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// PostgreSQL URL. Without one, wharf runs its own cluster under --data-dir.
    #[arg(
        long,
        env = "DATABASE_URL",
        global = true,
        value_name = "URL",
        hide_env_values = true
    )]
    pub database_url: Option<String>,
    /// Directory for the embedded database, mail files and state [default: .wharf].
    #[arg(long, env = "WHARF_DATA_DIR", global = true, value_name = "DIR")]
    pub data_dir: Option<PathBuf>,
    /// Log format on stderr.
    #[arg(long, env = "WHARF_LOG_FORMAT", global = true, value_enum)]
    pub log_format: Option<LogFormat>,
}

/// How log lines look.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    /// For people: one readable line per event.
    #[default]
    Human,
    /// For machines: one JSON object per line.
    Json,
}

/// The merged configuration.
#[derive(Clone)]
pub struct Config {
    /// PostgreSQL URL, when wharf should not run its own cluster.
    pub database_url: Option<String>,
    /// The data directory.
    pub data_dir: PathBuf,
    /// The log format.
    pub log_format: LogFormat,
    file: toml::Table,
}

/// The database URL and the file's tables may hold secrets (passwords, keys, tokens): Debug
/// output shows only whether they are set.
impl std::fmt::Debug for Config {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Config")
            .field("database_url", &self.database_url.as_ref().map(|_| "(set)"))
            .field("data_dir", &self.data_dir)
            .field("log_format", &self.log_format)
            .field("tables", &self.file.keys().collect::<Vec<_>>())
            .finish()
    }
}

impl Config {
    /// Reads the file (if any) and merges it under the flags and environment.
    pub fn load(global: &GlobalArgs) -> anyhow::Result<Config> {
        let path = match &global.config {
            Some(path) => Some(path.clone()),
            None => Some(PathBuf::from("wharf.toml")).filter(|p| p.exists()),
        };
        let file = match &path {
            Some(path) => {
                let file = read_file(path)?;
                check_keys(&file, path)?;
                file
            }
            None => toml::Table::new(),
        };
        check_environment(std::env::vars())?;
        let top = |key: &str| {
            file.get(key)
                .and_then(toml::Value::as_str)
                .map(str::to_owned)
        };
        let log_format = match (global.log_format, top("log_format").as_deref()) {
            (Some(format), _) => format,
            (None, None) => LogFormat::default(),
            (None, Some("human")) => LogFormat::Human,
            (None, Some("json")) => LogFormat::Json,
            (None, Some(other)) => bail!("log_format must be \"human\" or \"json\", not {other:?}"),
        };
        Ok(Config {
            database_url: global
                .database_url
                .clone()
                .filter(|u| !u.is_empty())
                .or(top("database_url")),
            data_dir: global
                .data_dir
                .clone()
                .or(top("data_dir").map(PathBuf::from))
                .unwrap_or_else(|| PathBuf::from(DATA_DIR_DEFAULT)),
            log_format,
            file,
        })
    }

    /// A subsystem's table, with `WHARF_<NAME>__<KEY>` variables laid over it. A missing table
    /// gives the subsystem's defaults; an unknown or ill-typed key is an error naming it.
    pub fn section<T: DeserializeOwned + Default>(&self, name: &str) -> anyhow::Result<T> {
        let mut table = match self.file.get(name) {
            Some(toml::Value::Table(table)) => table.clone(),
            Some(_) => bail!("[{name}] in the configuration file must be a table"),
            None => toml::Table::new(),
        };
        let prefix = format!("WHARF_{}__", name.to_ascii_uppercase());
        for (key, value) in std::env::vars() {
            if let Some(field) = key.strip_prefix(&prefix) {
                table.insert(field.to_ascii_lowercase(), env_value(&value));
            }
        }
        if table.is_empty() {
            return Ok(T::default());
        }
        toml::Value::Table(table)
            .try_into()
            .with_context(|| format!("invalid [{name}] configuration"))
    }
}

/// Refuses a top-level key or table wharf does not read, and a top-level key that is not a
/// string, naming the key, the file and (when one is close) what was probably meant.
fn check_keys(file: &toml::Table, path: &Path) -> anyhow::Result<()> {
    for (key, value) in file {
        if TOP_LEVEL_KEYS.contains(&key.as_str()) {
            if !value.is_str() {
                bail!(
                    "{}: `{key}` must be a string, not {}",
                    path.display(),
                    value.type_str()
                );
            }
            continue;
        }
        if TABLES.contains(&key.as_str()) {
            if !value.is_table() {
                bail!(
                    "{}: `{key}` must be a table (`[{key}]`), not {}",
                    path.display(),
                    value.type_str()
                );
            }
            continue;
        }
        let what = if value.is_table() {
            format!("unknown table `[{key}]`")
        } else {
            format!("unknown top-level key `{key}`")
        };
        let known = TOP_LEVEL_KEYS.iter().chain(TABLES.iter());
        let hint = match closest(key, known.clone()) {
            Some(near) if TABLES.contains(&near) => format!(" (did you mean `[{near}]`?)"),
            Some(near) => format!(" (did you mean `{near}`?)"),
            None => String::new(),
        };
        bail!(
            "{}: {what}{hint}; known top-level keys: {}; known tables: {}",
            path.display(),
            TOP_LEVEL_KEYS.join(", "),
            TABLES.join(", ")
        );
    }
    Ok(())
}

/// Refuses a `WHARF_<TABLE>__<KEY>` variable whose table wharf does not read: it would be
/// ignored as silently as an unknown table in the file.
fn check_environment(vars: impl Iterator<Item = (String, String)>) -> anyhow::Result<()> {
    for (name, _) in vars {
        let Some(rest) = name.strip_prefix("WHARF_") else {
            continue;
        };
        let Some((table, key)) = rest.split_once("__") else {
            continue;
        };
        let table = table.to_ascii_lowercase();
        if TABLES.contains(&table.as_str()) && !key.is_empty() {
            continue;
        }
        let hint = closest(&table, TABLES.iter())
            .map(|near| {
                format!(
                    " (did you mean WHARF_{}__{key}?)",
                    near.to_ascii_uppercase()
                )
            })
            .unwrap_or_default();
        bail!(
            "environment variable {name} names no configuration table{hint}; \
             WHARF_<TABLE>__<KEY> takes one of: {}",
            TABLES.join(", ")
        );
    }
    Ok(())
}

/// The known name nearest to `word` when it is within two edits (a typo), else none.
fn closest<'a>(word: &str, known: impl Iterator<Item = &'a &'a str>) -> Option<&'a str> {
    known
        .map(|k| (edit_distance(word, k), *k))
        .filter(|(d, _)| *d <= 2)
        .min()
        .map(|(_, k)| k)
}

/// Levenshtein distance with adjacent transpositions counted as one edit (`fromat`).
fn edit_distance(a: &str, b: &str) -> usize {
    let (a, b): (Vec<char>, Vec<char>) = (a.chars().collect(), b.chars().collect());
    let mut d = vec![vec![0usize; b.len() + 1]; a.len() + 1];
    for (i, row) in d.iter_mut().enumerate() {
        row[0] = i;
    }
    for (j, cell) in d[0].iter_mut().enumerate() {
        *cell = j;
    }
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            d[i][j] = (d[i - 1][j] + 1)
                .min(d[i][j - 1] + 1)
                .min(d[i - 1][j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                d[i][j] = d[i][j].min(d[i - 2][j - 2] + 1);
            }
        }
    }
    d[a.len()][b.len()]
}

fn read_file(path: &Path) -> anyhow::Result<toml::Table> {
    let size = std::fs::metadata(path)
        .with_context(|| format!("cannot read the configuration file {}", path.display()))?
        .len();
    if size > CONFIG_FILE_BYTES_MAX {
        bail!("configuration file {} is larger than 1 MiB", path.display());
    }
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read the configuration file {}", path.display()))?;
    text.parse::<toml::Table>()
        .with_context(|| format!("{} is not valid TOML", path.display()))
}

/// An environment value as TOML when it parses as a number, boolean or array; else a string.
fn env_value(raw: &str) -> toml::Value {
    format!("v = {raw}")
        .parse::<toml::Table>()
        .ok()
        .and_then(|mut t| t.remove("v"))
        .filter(|v| !matches!(v, toml::Value::Table(_)))
        .unwrap_or_else(|| toml::Value::String(raw.to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn environment_values_keep_their_type() {
        let check =
            |raw: &str, expected: toml::Value| assert_eq!(env_value(raw), expected, "{raw}");
        check("25", toml::Value::Integer(25));
        check("true", toml::Value::Boolean(true));
        check(
            "smtp.example.org",
            toml::Value::String("smtp.example.org".into()),
        );
        check("\"quoted\"", toml::Value::String("quoted".into()));
        check("{ a = 1 }", toml::Value::String("{ a = 1 }".into()));
    }

    #[test]
    fn unknown_top_level_keys_and_tables_are_refused_by_name() {
        let check = |text: &str, expected: &[&str]| {
            let file: toml::Table = text.parse().unwrap();
            let result = check_keys(&file, Path::new("wharf.toml"));
            if expected.is_empty() {
                result.unwrap();
                return;
            }
            let text = format!("{:#}", result.unwrap_err());
            for part in expected {
                assert!(text.contains(part), "{part:?} not in {text:?}");
            }
        };
        check("log_format = \"json\"\n[email]\nrelay_host = \"x\"", &[]);
        check(
            "log_fromat = \"json\"",
            &[
                "wharf.toml",
                "unknown top-level key `log_fromat`",
                "did you mean `log_format`?",
            ],
        );
        check(
            "[emial]\nrelay_host = \"x\"",
            &[
                "wharf.toml",
                "unknown table `[emial]`",
                "did you mean `[email]`?",
            ],
        );
        check(
            "[zzzzzzzz]",
            &["unknown table `[zzzzzzzz]`", "known tables: serve"],
        );
        check("data_dir = 5", &["`data_dir` must be a string"]);
        check("email = 5", &["`email` must be a table"]);
    }

    #[test]
    fn environment_variables_must_name_a_known_table() {
        let vars = |names: &[&str]| {
            names
                .iter()
                .map(|n| ((*n).to_owned(), String::new()))
                .collect::<Vec<_>>()
                .into_iter()
        };
        check_environment(vars(&[
            "WHARF_EMAIL__RELAY_HOST",
            "WHARF_LOG",
            "WHARF_PG_BIN_DIR",
        ]))
        .unwrap();
        let err = check_environment(vars(&["WHARF_EMIAL__RELAY_HOST"])).unwrap_err();
        let text = err.to_string();
        assert!(text.contains("WHARF_EMIAL__RELAY_HOST"), "{text}");
        assert!(
            text.contains("did you mean WHARF_EMAIL__RELAY_HOST?"),
            "{text}"
        );
    }

    /// Every table a subsystem reads is listed in [`TABLES`], or the file could not set it: a
    /// new `config.section("…")` anywhere in this crate fails here until it is added.
    #[test]
    fn every_table_read_is_a_known_table() {
        fn walk(dir: &Path, out: &mut Vec<(PathBuf, String)>) {
            for entry in std::fs::read_dir(dir).unwrap().filter_map(Result::ok) {
                let path = entry.path();
                if path.is_dir() {
                    walk(&path, out);
                } else if path.extension().is_some_and(|e| e == "rs")
                    // This file's own tests read made-up tables.
                    && !path.ends_with("src/config.rs")
                {
                    let text = std::fs::read_to_string(&path).unwrap();
                    out.push((path, text));
                }
            }
        }
        let mut files = Vec::new();
        walk(
            &Path::new(env!("CARGO_MANIFEST_DIR")).join("src"),
            &mut files,
        );
        let needle = concat!(".section", "(\"");
        let mut read = 0;
        for (path, text) in &files {
            for (at, _) in text.match_indices(needle) {
                let rest = &text[at + needle.len()..];
                let name = &rest[..rest.find('"').unwrap()];
                assert!(
                    TABLES.contains(&name),
                    "{} reads [{name}], which TABLES does not list",
                    path.display()
                );
                read += 1;
            }
        }
        assert!(read >= TABLES.len(), "found only {read} section reads");
    }

    #[test]
    fn edit_distance_counts_a_swap_as_one() {
        assert_eq!(edit_distance("log_fromat", "log_format"), 1);
        assert_eq!(edit_distance("emial", "email"), 1);
        assert_eq!(edit_distance("email", "email"), 0);
        assert_eq!(edit_distance("", "abc"), 3);
    }

    #[derive(Debug, Default, serde::Deserialize, PartialEq)]
    #[serde(deny_unknown_fields)]
    struct Demo {
        port: Option<u16>,
        host: Option<String>,
    }

    #[test]
    fn sections_read_the_file_and_refuse_unknown_keys() {
        let mut file = toml::Table::new();
        let mut demo = toml::Table::new();
        demo.insert("port".into(), toml::Value::Integer(2525));
        file.insert("demo".into(), toml::Value::Table(demo.clone()));
        let config = Config {
            database_url: None,
            data_dir: PathBuf::from(".wharf"),
            log_format: LogFormat::Human,
            file: file.clone(),
        };
        let parsed: Demo = config.section("demo").unwrap();
        assert_eq!(
            parsed,
            Demo {
                port: Some(2525),
                host: None
            }
        );
        let missing: Demo = config.section("absent_section_for_test").unwrap();
        assert_eq!(missing, Demo::default());

        demo.insert("typo".into(), toml::Value::Integer(1));
        file.insert("demo".into(), toml::Value::Table(demo));
        let config = Config { file, ..config };
        let err = config.section::<Demo>("demo").unwrap_err();
        assert!(format!("{err:#}").contains("typo"), "{err:#}");
    }
}
