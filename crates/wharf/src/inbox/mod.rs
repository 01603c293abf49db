//! The inbox service (placeholder, filled by the inbox work).
