//! How an error reads on a terminal or in a log line: each cause once, outermost first.
//!
//! anyhow's `{:#}` prints every cause's `Display`, and many causes print their source inside
//! their own text too (sqlx's "error returned from database: …", a migration error wrapping
//! it), so one PostgreSQL message appeared two or three times, each with PostgreSQL's own
//! C source line (`at line 948`), which tells an operator nothing. Here each cause contributes
//! only what it adds to its source, and a PostgreSQL error shows its message, detail, hint and
//! SQLSTATE.
//!
//! Must not know: which command failed or why.

use std::error::Error;
use std::fmt::Write as _;

/// The error and its causes, each said once, joined by `: `.
pub fn chain(error: &anyhow::Error) -> String {
    let mut parts: Vec<String> = Vec::new();
    // The text of a database error already said in PostgreSQL's terms: its own cause (sqlx
    // hands the boxed error on as the next source) is not said again.
    let mut said_database: Option<String> = None;
    for cause in error.chain() {
        if said_database.as_deref() == Some(cause.to_string().as_str()) {
            continue;
        }
        let own = match cause.downcast_ref::<sqlx::Error>() {
            Some(sqlx::Error::Database(db)) => {
                said_database = Some(db.to_string());
                database_text(db.as_ref())
            }
            _ => own_text(cause),
        };
        if own.is_empty() || parts.last().is_some_and(|last| *last == own) {
            continue;
        }
        parts.push(own);
    }
    parts.join(": ")
}

/// A PostgreSQL error as an operator reads it: message, detail, hint and SQLSTATE, without
/// the server's C source line.
fn database_text(db: &dyn sqlx::error::DatabaseError) -> String {
    let mut text = db.message().to_owned();
    if let Some(pg) = db.try_downcast_ref::<sqlx::postgres::PgDatabaseError>() {
        if let Some(detail) = pg.detail() {
            let _ = write!(text, " ({detail})");
        }
        if let Some(hint) = pg.hint() {
            let _ = write!(text, "; hint: {hint}");
        }
    }
    if let Some(code) = db.code() {
        let _ = write!(text, " [SQLSTATE {code}]");
    }
    text
}

/// What `cause` says beyond its source.
fn own_text(cause: &(dyn Error + 'static)) -> String {
    if let Some(db) = cause.downcast_ref::<sqlx::postgres::PgDatabaseError>() {
        return database_text(db);
    }
    let text = cause.to_string();
    let Some(source) = cause.source() else {
        return text;
    };
    let inner = source.to_string();
    match text.strip_suffix(&inner) {
        Some(own) => own.trim_end().trim_end_matches(':').trim_end().to_owned(),
        None => text,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug)]
    struct Wraps(&'static str, Option<Box<Wraps>>);

    impl std::fmt::Display for Wraps {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            match &self.1 {
                Some(inner) => write!(f, "{}: {inner}", self.0),
                None => f.write_str(self.0),
            }
        }
    }

    impl Error for Wraps {
        fn source(&self) -> Option<&(dyn Error + 'static)> {
            self.1.as_deref().map(|e| e as &(dyn Error + 'static))
        }
    }

    #[test]
    fn a_cause_that_prints_its_source_is_said_once() {
        let inner = Wraps("relation \"t\" does not exist", None);
        let outer = Wraps("while executing migrations", Some(Box::new(inner)));
        let error = anyhow::Error::new(outer).context("cannot list tenants");
        assert_eq!(
            chain(&error),
            "cannot list tenants: while executing migrations: relation \"t\" does not exist"
        );
    }

    #[test]
    fn plain_causes_are_joined() {
        let error = anyhow::anyhow!("connection refused").context("PostgreSQL at 127.0.0.1:1");
        assert_eq!(
            chain(&error),
            "PostgreSQL at 127.0.0.1:1: connection refused"
        );
    }
}
