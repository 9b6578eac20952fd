//! Guest code on the bus, in both languages: the bus bridge rules that
//! refuse denied functions before dispatch, and what belongs to the
//! operator (the configuration, trigger types, the engine's administration).

mod operator;
mod rules;
