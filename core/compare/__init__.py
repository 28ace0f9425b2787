"""One job on several devices or strategies, side by side, and its export."""
