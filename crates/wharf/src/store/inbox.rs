//! Inbox statements (placeholder, filled by the inbox work).
