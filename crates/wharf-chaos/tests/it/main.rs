//! wharf-chaos integration tests: one integration-test binary, modules below.

mod small;
