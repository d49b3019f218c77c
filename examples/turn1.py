import pandas as pd

df = pd.read_csv("sales.csv")
df["revenue"] = df["units"] * df["unit_price"] * (1 - df["discount"])
print(df.shape)
