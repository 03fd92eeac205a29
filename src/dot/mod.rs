//! DOT subset parser.
