//! Inbox integration tests (filled by the inbox work).
