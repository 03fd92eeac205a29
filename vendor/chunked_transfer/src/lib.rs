mod decoder;
pub use crate::decoder::Decoder;

mod encoder;
pub use crate::encoder::Encoder;
