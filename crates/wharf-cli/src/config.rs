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
            Some(path) => read_file(path)?,
            None => toml::Table::new(),
        };
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
