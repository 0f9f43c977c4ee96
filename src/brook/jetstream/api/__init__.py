"""The JetStream JSON API (`$JS.API.*`): a dispatcher and one module per endpoint family."""
