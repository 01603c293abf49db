//! The `email` kind (placeholder, filled by the email work).
