//! Placeholder: filled in by the inbox work (issue 5).
