//! Tests of the schema catalog: the built-in v1 schemas (`builtin`) and the schema language
//! (`language`).

mod builtin;
mod language;
