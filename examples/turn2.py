# `df` comes from turn1.py: earlier successful turns are kept (chunked mode) or still alive (persistent mode).
df.groupby("region")["revenue"].sum().round(2).sort_values(ascending=False)
