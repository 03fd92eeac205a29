//! Command-line interface: argument parsing and output formatting only.

pub fn main() -> i32 {
    0
}
