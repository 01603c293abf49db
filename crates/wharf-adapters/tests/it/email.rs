//! Email adapter tests (filled by the email work).
