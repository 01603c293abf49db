//! The adapters' one integration-test binary: real PostgreSQL, real SMTP and HTTP servers on
//! loopback, started by the tests themselves.

#[cfg(feature = "email")]
mod email;
#[cfg(feature = "http")]
mod http;
