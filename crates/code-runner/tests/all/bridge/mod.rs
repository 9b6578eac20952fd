//! Guest code on the bus: the bus bridge rules and what belongs to the operator.

mod node;
mod operator;
mod rules;
