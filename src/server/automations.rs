//! The automations API: the catalog routes (through [`super::catalog`]) and, beside them,
//! firing, hooks, fires and runs of one automation.
//!
//! Owns: the HTTP side of `crate::automations`. Must not touch: when things fire (the
//! automations module decides) or SQL.

use super::catalog::Served;
use super::App;
use crate::automations::Automations;
use crate::catalog::Catalog;

impl Served for Automations {
    fn catalog(app: &App) -> &Catalog<Automations> {
        &app.automations
    }
}
