//! Client load.

pub mod ledger;
