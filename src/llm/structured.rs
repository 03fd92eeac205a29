//! The wording of a structured-output repair turn (SPEC 2.13 "Structured output rules"): the
//! corrective message a stage's conversation gets after its reply failed validation. Finding
//! JSON in replies, routing directives and schema validation live in
//! [`crate::engine::output`] (the engine decides whether a repair turn follows); the agent
//! layer sends the message into the same conversation (`agent::stage`).
//! Must not validate anything or call providers.

/// The corrective message sent back to the model after a validation failure.
pub fn repair_message(error: &str) -> String {
    format!(
        "Your previous reply did not satisfy the required output format: {error}\n\
         Reply again with the complete output in the required format (a single JSON value), \
         and nothing that contradicts it."
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_repair_message_carries_the_error() {
        let m = repair_message("/risk: \"low\" is not of type \"integer\"");
        assert!(m.starts_with("Your previous reply did not satisfy"));
        assert!(m.contains("/risk"));
    }
}
